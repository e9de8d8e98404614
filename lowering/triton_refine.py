"""Tiling a kernel further when its tensor-core operands overflow shared memory.

``tl.dot`` reads its operands from shared memory, and Triton's pipeline keeps
a copy per stage. A block graph may hold a whole contraction dim in one tile
(a matrix-vector product loading ``[1, 4096] x [4096, 16]`` at once) that no
block's shared memory holds. Such a kernel is not given up on: its matmul is
split along K into more for-loop iterations, whose products the for-loop
sums, until its operands take at most :data:`DOT_SHARE` of the target's
shared memory (so two pipeline stages fit):

- a kernel with a for-loop whose per-iteration tiles all feed matmuls along
  K, summed by a plain ``forloop_accum``, runs ``s`` times more iterations of
  tiles ``s`` times thinner;
- a kernel without a for-loop whose big matmul reads two tiles nothing else
  reads gets one: both tiles walk K and a ``forloop_accum`` sums the
  products, so what used the product uses the sum.

The kernel computes the same function (each split is a regrouping of the same
sum); kernels of any other shape are left as they are.
"""

from __future__ import annotations

from math import prod

from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from mirage_xdsl.dialects import block, kernel, shapes
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.gpu_target import H100, Target
from mirage_xdsl.lowering.triton_tiles import DOT_MIN, next_pow2

DOT_SHARE = 0.5
"""Most of a block's shared memory one iteration's dot operands may take."""


def _bytes(value: SSAValue, k_dim: int, rows_dim: int) -> int:
    """Shared memory of a dot operand's padded tile."""
    shape = [next_pow2(d) for d in t.tensor_shape(value)]
    for d in (k_dim, rows_dim):
        shape[d] = max(shape[d], DOT_MIN)
    width = 4 if str(t.element_type(value)) == "f32" else 2
    return prod(shape) * width


def dot_bytes(op: block.MatmulOp) -> int:
    """Shared memory of one ``tl.dot``'s operands, padded as Triton holds them."""
    rank = len(t.tensor_shape(op.results[0]))
    return _bytes(op.lhs, rank - 1, rank - 2) + _bytes(op.rhs, rank - 2, rank - 1)


def _k_dims(op: block.MatmulOp) -> dict[SSAValue, int]:
    rank = len(t.tensor_shape(op.results[0]))
    return {op.lhs: rank - 1, op.rhs: rank - 2}


def _only_user(value: SSAValue):
    uses = list(value.uses)
    return uses[0].operation if len(uses) == 1 else None


def _summed(op: block.MatmulOp) -> bool:
    """Whether the matmul's product only feeds a plain sum over the loop."""
    user = _only_user(op.results[0])
    return (
        isinstance(user, block.ForloopAccumOp)
        and user.reduction == "none"
        and not user.shifted
    )


def _inputs(customized: kernel.CustomizedOp) -> list[block.InputOp]:
    return [o for o in customized.entry.ops if isinstance(o, block.InputOp)]


def _looped_split(customized: kernel.CustomizedOp, factor: int) -> bool:
    """Whether every per-iteration tile is a K operand of a summed matmul and
    its K tile divides by ``factor``."""
    walking = [i for i in _inputs(customized) if i.forloop_dim >= 0]
    if not walking:
        return False
    for i in walking:
        user = _only_user(i.result)
        if not isinstance(user, block.MatmulOp) or not _summed(user):
            return False
        if _k_dims(user).get(i.result) != i.forloop_dim:
            return False
        if t.tensor_shape(i.result)[i.forloop_dim] % factor:
            return False
    return True


def _unlooped_split(op: block.MatmulOp, factor: int) -> bool:
    """Whether both operands of ``op`` are tiles only it reads, whose K
    divides by ``factor``."""
    for value, k in _k_dims(op).items():
        if not isinstance(value.owner, block.InputOp) or _only_user(value) is not op:
            return False
        if t.tensor_shape(value)[k] % factor:
            return False
    return True


def _retile(
    customized: kernel.CustomizedOp, forloop: int, fmaps: dict[block.InputOp, int]
) -> None:
    """Give the kernel ``forloop`` iterations and every input its tile for
    that: the inputs in ``fmaps`` walk the dim it names, the others keep
    theirs if the kernel had a loop and read whole tiles if not."""
    looped = customized.forloop > 1
    customized.properties["forloop_range"] = IntegerAttr(forloop, 64)
    for op in _inputs(customized):
        fmap = fmaps.get(op, op.forloop_dim if looped else -1)
        shape = shapes.tile_shape(
            op.viewed_shape, op.input_map, fmap, customized.grid_dims, forloop
        )
        new = op.retiled(fmap, t.result_type_like(op.result, shape))
        Rewriter.replace_op(op, new)


def refine(customized: kernel.CustomizedOp, target: Target = H100) -> int:
    """Split the kernel's largest dot along K until its operands fit (see the
    module docstring); the factor its K tiles were split by (1: unchanged)."""
    matmuls = [o for o in customized.entry.ops if isinstance(o, block.MatmulOp)]
    if not matmuls:
        return 1
    big = max(matmuls, key=dot_bytes)
    budget = DOT_SHARE * target.shared_memory_per_block
    factor = 1
    while dot_bytes(big) / factor > budget:
        factor *= 2
    if factor == 1:
        return 1
    forloop = customized.forloop
    if forloop > 1 and _looped_split(customized, factor):
        _retile(customized, forloop * factor, {})
        return factor
    if forloop == 1 and _unlooped_split(big, factor):
        fmaps = {v.owner: k for v, k in _k_dims(big).items()}  # type: ignore[misc]
        _retile(customized, factor, fmaps)
        uses = list(big.results[0].uses)
        accum = block.ForloopAccumOp(big.results[0])
        Rewriter.insert_op(accum, InsertPoint.after(big))
        for use in uses:
            use.operation.operands[use.index] = accum.result
        return factor
    return 1
