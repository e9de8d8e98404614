"""``legalize-for-triton``: reshape block graphs into what Triton kernels can express.

Inside a Triton kernel every value is a register tensor with power-of-two
extents, and matmuls are ``tl.dot`` (tensor cores, every side >= 16) or an
element-wise multiply followed by ``tl.sum``. This pass rewrites each
``kernel.customized`` block graph so the printer (``-t triton``) can emit it
op by op:

- thread graphs are inlined back into block element-wise ops: Triton keeps
  every value in registers anyway, so a thread graph buys nothing here;
- a matmul of concatenations along the contraction dim becomes a sum of
  matmuls, ``concat(a, b)·concat(c, d) = a·c + b·d`` (what LoRA's one-kernel
  form needs), so no register concatenation feeds a dot;
- a kernel whose tensor-core operands would not fit shared memory is tiled
  further along K (``lowering/triton_refine.py``);
- every result gets ``triton.tile``, its padded register shape (see
  ``lowering/triton_tiles.py``), and every matmul ``triton.matmul``, the form
  it lowers to: ``"dot"``, ``"fma"`` or ``"defer"``.

Option ``small-matmul``: ``dot`` (default) puts every matmul on tensor cores,
padding rows to 16; ``fma`` uses multiply-and-sum for matmuls with fewer than
16 real rows whose product tile is small (batch-1 and batch-8 decoding);
``defer`` does too, but a product summed over the for-loop keeps its
``M × K × N`` terms in the accumulator and sums over K once, after the loop
(no cross-thread sum per iteration: the next loads issue sooner).
The autotuner compiles all three and keeps the fastest.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.kernel import dense_i64
from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.lowering.triton_refine import refine
from mirage_xdsl.lowering.triton_tiles import fma_fits, padded_shapes

TILE_ATTR = "triton.tile"
MATMUL_ATTR = "triton.matmul"
SMALL_MATMUL_FORMS = ("dot", "fma", "defer")


def inline_thread_graph(graph: block.ThreadGraphOp) -> None:
    """Replace a thread graph by the block ops it computes."""
    mapping: dict[SSAValue, SSAValue] = dict(
        zip(graph.entry.args, graph.inputs, strict=True)
    )
    for op in graph.entry.ops:
        if op.name == "thread.yield":
            for result, value in zip(graph.outputs, op.operands, strict=True):
                result.replace_all_uses_with(mapping[value])
            continue
        new = block.ELEMENTWISE_OPS[op.KIND](  # type: ignore[attr-defined]
            *[mapping[v] for v in op.operands],
            *op.constant_args(),  # type: ignore[attr-defined]
        )
        Rewriter.insert_op(new, InsertPoint.before(graph))
        mapping[op.results[0]] = new.results[0]
    graph.detach()
    graph.erase()


def _concat_parts(value: SSAValue, dim: int) -> list[SSAValue]:
    """The pieces of ``value`` along ``dim`` if it is a concatenation there."""
    op = value.owner
    if isinstance(op, block.ConcatOp) and op.dim.value.data == dim:
        return [p for v in op.operands for p in _concat_parts(v, dim)]
    return [value]


def split_concat_matmul(op: block.MatmulOp) -> bool:
    """``concat(a, b)·concat(c, d)`` along K becomes ``a·c + b·d``; True if rewritten."""
    rank = len(t.tensor_shape(op.results[0]))
    lhs = _concat_parts(op.lhs, rank - 1)
    rhs = _concat_parts(op.rhs, rank - 2)
    if len(lhs) == 1 and len(rhs) == 1:
        return False
    cuts_l = _cuts(lhs, rank - 1)
    cuts_r = _cuts(rhs, rank - 2)
    if cuts_l != cuts_r:
        return False
    total = None
    for a, b in zip(lhs, rhs, strict=True):
        product = block.MatmulOp(a, b)
        Rewriter.insert_op(product, InsertPoint.before(op))
        if total is None:
            total = product.results[0]
        else:
            add = block.AddOp(total, product.results[0])
            Rewriter.insert_op(add, InsertPoint.before(op))
            total = add.results[0]
    assert total is not None
    op.results[0].replace_all_uses_with(total)
    op.detach()
    op.erase()
    return True


def _cuts(parts: list[SSAValue], dim: int) -> list[int]:
    return [t.tensor_shape(p)[dim] for p in parts]


def drop_dead(customized: kernel.CustomizedOp) -> None:
    """Erase pure ops left without users (concatenations a split made dead)."""
    for op in reversed(list(customized.entry.ops)):
        if isinstance(op, block.ConcatOp) and all(not r.uses for r in op.results):
            op.detach()
            op.erase()


def summed_over_loop(op: block.MatmulOp) -> bool:
    """Whether a 2-d matmul's only user sums it over the for-loop (a plain
    ``block.forloop_accum``): its sum over K can wait until after the loop."""
    result = op.results[0]
    if len(t.tensor_shape(result)) != 2 or not result.has_one_use():
        return False
    user = next(iter(result.uses)).operation
    return (
        isinstance(user, block.ForloopAccumOp)
        and user.reduction == "none"
        and not user.shifted
    )


def annotate(customized: kernel.CustomizedOp, small_matmul: str) -> None:
    """Attach each result's padded tile and each matmul's form."""
    ops = list(customized.entry.ops)
    forms: dict[Operation, str] = {}
    for op in ops:
        if isinstance(op, block.MatmulOp):
            small = small_matmul != "dot" and fma_fits(op)
            deferred = small_matmul == "defer" and summed_over_loop(op)
            forms[op] = ("defer" if deferred else "fma") if small else "dot"
    dots = [op for op, form in forms.items() if form == "dot"]
    fmas = [op for op, form in forms.items() if form != "dot"]
    tiles = padded_shapes(ops, dots, fmas)
    for op in ops:
        if op.results:
            op.attributes[TILE_ATTR] = dense_i64(tiles[op.results[0]])
        if op in forms:
            op.attributes[MATMUL_ATTR] = StringAttr(forms[op])


def legalize(customized: kernel.CustomizedOp, small_matmul: str = "dot") -> None:
    for graph in [
        o for o in customized.entry.ops if isinstance(o, block.ThreadGraphOp)
    ]:
        inline_thread_graph(graph)
    for op in [o for o in customized.entry.ops if isinstance(o, block.MatmulOp)]:
        split_concat_matmul(op)
    drop_dead(customized)
    refine(customized)
    annotate(customized, small_matmul)


@dataclass(frozen=True)
class LegalizeForTritonPass(ModulePass):
    """Inline thread graphs, split matmuls of concatenations into sums of dots,
    and annotate every block value with its padded Triton tile
    (``triton.tile``) and every matmul with its form (``triton.matmul``).

    ``small-matmul`` is ``dot`` (tensor cores, rows padded to 16), ``fma``
    (multiply-and-sum for matmuls with fewer than 16 rows) or ``defer`` (the
    same, summing over K after the for-loop where the product is summed over it).
    """

    name = "legalize-for-triton"

    small_matmul: str = "dot"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.small_matmul not in SMALL_MATMUL_FORMS:
            raise MirageError(
                f"error: legalize-for-triton: small-matmul must be one of "
                f"{list(SMALL_MATMUL_FORMS)}, got '{self.small_matmul}'"
            )
        for customized in [o for o in op.walk() if isinstance(o, kernel.CustomizedOp)]:
            legalize(customized, self.small_matmul)
