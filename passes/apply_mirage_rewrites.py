"""``apply-mirage-rewrites``: optimise a module with the rewrite library alone.

Every ``pdl.pattern`` of the library is matched against the module's kernel
ops (xDSL's PDL matcher). At each match the pattern's µGraph template is
instantiated for the matched shapes, verified equivalent on those shapes, and
spliced in place of the matched subgraph; no search runs. Matches whose inner
values are used outside the match are left alone, as are templates that do not
divide at the new shapes.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func, pdl
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreters.pdl import PDLMatcher
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.rewriter import InsertPoint

from mirage_xdsl.rewrites.library import (
    Checker,
    Rewrite,
    finite_field_check,
    interior_ops,
    library_paths,
    load_library,
)


@dataclass
class LibraryPattern(RewritePattern):
    """Applies every library entry whose pattern matches at an op."""

    ctx: Context
    rewrites: list[Rewrite]
    check: Checker
    applied: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not op.name.startswith("kernel.") or op.name == "kernel.customized":
            return
        for rewrite in self.rewrites:
            if self._try(rewrite, op, rewriter):
                return

    def _try(
        self, rewrite: Rewrite, root: Operation, rewriter: PatternRewriter
    ) -> bool:
        matcher = PDLMatcher()
        root_value = rewrite.root
        assert isinstance(root_value.owner, pdl.OperationOp)
        if not matcher.match_operation(root_value, root_value.owner, root):
            return False
        args = [
            matcher.get_constant_or_matched_value(v)
            for v in rewrite.rewrite_op.external_args[1:]
        ]
        matched = [
            v for v in matcher.matching_context.values() if isinstance(v, Operation)
        ]
        inner = interior_ops(root, matched)
        if any(
            use.operation not in matched
            for op in inner
            for r in op.results
            for use in r.uses
        ):
            return False
        instance = rewrite.instantiate(self.ctx, [a.type for a in args], self.check)  # type: ignore[union-attr]
        if isinstance(instance, str):
            self.rejected[rewrite.name] += 1
            return False
        body = instance.clone().body.block
        mapping = dict(zip(body.args, args, strict=True))
        new_ops = []
        for op in list(body.ops):
            if isinstance(op, func.ReturnOp):
                results = [mapping.get(v, v) for v in op.operands]
                break
            op.detach()
            for i, v in enumerate(op.operands):
                if v in mapping:
                    op.operands[i] = mapping[v]
            new_ops.append(op)
        rewriter.insert_op(new_ops, InsertPoint.before(root))
        rewriter.replace_op(root, [], results)
        for op in reversed(inner):
            rewriter.erase_op(op)
        self.applied[rewrite.name] += 1
        return True


@dataclass(frozen=True)
class ApplyMirageRewrites(ModulePass):
    """Rewrite kernel subgraphs with verified µGraphs from a rewrite library.

    ``library`` is a .mlir file or a directory of them; empty means the
    library bundled with mirage-xdsl (patterns found for the benchmark
    workloads). Each instantiation is verified on the matched shapes.
    """

    name = "apply-mirage-rewrites"

    library: str = ""
    quiet: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        start = time.perf_counter()
        rewrites = load_library(ctx, library_paths(self.library), finite_field_check)
        pattern = LibraryPattern(ctx, rewrites, finite_field_check)
        PatternRewriteWalker(pattern, apply_recursively=True).rewrite_module(op)
        if not self.quiet:
            applied = ", ".join(f"{n} x{c}" for n, c in sorted(pattern.applied.items()))
            print(
                f"apply-mirage-rewrites: {sum(pattern.applied.values())} applied"
                f"{f' ({applied})' if applied else ''}, "
                f"{sum(pattern.rejected.values())} rejected, "
                f"{time.perf_counter() - start:.3f} s",
                file=sys.stderr,
            )
