"""Load a rewrite library and instantiate its templates at matched shapes.

A library is a module of ``pdl.pattern`` ops, each ending in
``pdl.rewrite %root with "mirage.instantiate"(%name, %inputs...)``, and the
``func.func`` templates they name. Loading re-verifies every entry: the
kernel-level program the pattern matches is rebuilt from the pattern at the
template's own shapes and checked equivalent to the template. Instantiating
at other shapes retargets the template (``mirage_xdsl.ir.rebuild``) and checks
it again on those shapes; results are cached per (template, shapes).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects import func, pdl
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from mirage_xdsl.ir.diagnostics import MirageError, parse, verify
from mirage_xdsl.ir.rebuild import RetargetError, make_op, retarget
from mirage_xdsl.rewrites.emit import INSTANTIATE

Checker = Callable[[ModuleOp, ModuleOp], tuple[bool, str]]
"""Decides whether two single-function modules are equivalent, with a reason."""

BUNDLED = Path(__file__).parent / "library"
"""The project's own library: patterns found for the benchmark workloads."""


def cache_dir() -> Path | None:
    """Where verified instantiations are remembered ($MIRAGE_CACHE_DIR=off: nowhere)."""
    root = os.environ.get("MIRAGE_CACHE_DIR", "")
    if root == "off":
        return None
    base = Path(root) if root else Path.home() / ".cache" / "mirage-xdsl"
    return base / "rewrites"


def finite_field_check(a: ModuleOp, b: ModuleOp) -> tuple[bool, str]:
    """The default checker: the probabilistic finite-field verifier.

    Accepting verdicts are remembered on disk, keyed by both programs' text, so
    a library entry is verified once per shape, not once per compilation.
    """
    from mirage_xdsl.ir.printing import module_text
    from mirage_xdsl.verify.equivalence import equivalent

    key = hashlib.sha256((module_text(a) + module_text(b)).encode()).hexdigest()
    directory = cache_dir()
    if directory is not None and (directory / key).exists():
        return True, (directory / key).read_text()
    verdict = equivalent(a, b)
    if verdict.equivalent and directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory)
        with os.fdopen(fd, "w") as f:
            f.write(
                f"{verdict.reason} (false-positive bound {verdict.false_positive_bound:.1e})"
            )
        os.replace(tmp, directory / key)
    return verdict.equivalent, verdict.reason


@dataclass
class Rewrite:
    """One library entry: a pattern and the µGraph template it rewrites to."""

    name: str
    pattern: pdl.PatternOp
    template: func.FuncOp
    instances: dict[tuple[Attribute, ...], func.FuncOp | str] = field(
        default_factory=dict
    )

    @property
    def rewrite_op(self) -> pdl.RewriteOp:
        op = self.pattern.body.block.last_op
        assert isinstance(op, pdl.RewriteOp)
        return op

    @property
    def root(self) -> SSAValue:
        root = self.rewrite_op.root
        assert root is not None
        return root

    def source(self, ctx: Context, input_types: Sequence[Attribute]) -> func.FuncOp:
        """The kernel-level program the pattern matches, at ``input_types``."""
        inputs = self.rewrite_op.external_args[1:]
        body = Block(arg_types=list(input_types))
        values: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args, strict=True))
        result = None
        for op in self.pattern.body.block.ops:
            if isinstance(op, pdl.ResultOp):
                values[op.val] = values[op.parent_].owner.results[op.index.value.data]  # type: ignore[union-attr]
            elif isinstance(op, pdl.OperationOp):
                cls = ctx.get_op(op.opName.data)  # type: ignore[union-attr]
                props = {
                    n.data: v.owner.value  # type: ignore[union-attr]
                    for n, v in zip(
                        op.attributeValueNames, op.attribute_values, strict=True
                    )
                }
                built = make_op(cls, [values[v] for v in op.operand_values], props)
                body.add_op(built)
                values[op.op] = built.results[0]
                result = built
        assert result is not None
        body.add_op(func.ReturnOp(result.results[0]))
        types = (list(input_types), [result.results[0].type])
        return func.FuncOp(self.name, types, Region(body))

    def instantiate(
        self, ctx: Context, input_types: Sequence[Attribute], check: Checker
    ) -> func.FuncOp | str:
        """The template at ``input_types``, verified; or why it does not apply."""
        key = tuple(input_types)
        if key not in self.instances:
            self.instances[key] = self._instantiate(ctx, input_types, check)
        return self.instances[key]

    def _instantiate(
        self, ctx: Context, input_types: Sequence[Attribute], check: Checker
    ) -> func.FuncOp | str:
        try:
            source = self.source(ctx, input_types)
            same = list(input_types) == list(self.template.function_type.inputs.data)
            candidate = (
                self.template.clone() if same else retarget(self.template, input_types)
            )
            ModuleOp([candidate.clone()]).verify()
        except (RetargetError, Exception) as e:  # noqa: BLE001 - any failure means "no"
            return f"does not apply at these shapes: {e}"
        ok, reason = check(ModuleOp([source]), ModuleOp([candidate.clone()]))
        return candidate if ok else f"not equivalent at these shapes: {reason}"


def load_library(ctx: Context, paths: Sequence[Path], check: Checker) -> list[Rewrite]:
    """Parse library files and re-verify every entry at its own shapes."""
    rewrites: list[Rewrite] = []
    for path in paths:
        module = parse(ctx, path.read_text(), str(path))
        verify(module)
        templates = {
            op.sym_name.data: op for op in module.ops if isinstance(op, func.FuncOp)
        }
        for op in module.ops:
            if not isinstance(op, pdl.PatternOp):
                continue
            rewrite = _entry(op, templates, path)
            own = rewrite.template.function_type.inputs.data
            result = rewrite.instantiate(ctx, own, check)
            if isinstance(result, str):
                raise MirageError(f"{path}: error: rewrite '{rewrite.name}' {result}")
            rewrites.append(rewrite)
    return rewrites


def _entry(
    pattern: pdl.PatternOp, templates: dict[str, func.FuncOp], path: Path
) -> Rewrite:
    last = pattern.body.block.last_op
    if not (
        isinstance(last, pdl.RewriteOp)
        and last.name_ is not None
        and last.name_.data == INSTANTIATE
        and last.external_args
    ):
        raise MirageError(
            f"{path}: error: pattern must end in "
            f"'pdl.rewrite ... with \"{INSTANTIATE}\"(name, inputs...)'"
        )
    name_attr = last.external_args[0].owner
    name = getattr(name_attr, "value", None)
    if not isinstance(name, StringAttr) or name.data not in templates:
        raise MirageError(f"{path}: error: pattern names no template in the library")
    return Rewrite(name.data, pattern, templates[name.data])


def library_paths(library: str) -> list[Path]:
    """Files of a library given as a file, a directory, or '' for the bundled one."""
    root = Path(library) if library else BUNDLED
    if root.is_dir():
        return sorted(root.glob("*.mlir"))
    if not root.exists():
        raise MirageError(f"{library}: error: no such rewrite library")
    return [root]


def interior_ops(root: Operation, matched: Sequence[Operation]) -> list[Operation]:
    """Matched ops other than the root, in program order."""
    ops = [op for op in matched if op is not root]
    block = root.parent_block()
    assert block is not None
    order = {op: i for i, op in enumerate(block.ops)}
    return sorted(ops, key=lambda op: order.get(op, -1))
