"""An RMSNorm computed inside the split-K kernels of the skinny matmul it feeds.

Where the rows of a skinny matmul (``split_k.py``) are ``rms_norm(a)``
scaled by per-column weights (``rms_norm(a) * w``, as every transformer's
norm before its projections), at one or two rows (:data:`PROLOGUE_ROWS`),
the norm is the matmul's *prologue* (:func:`prologue_of`): the partial kernel
multiplies ``a``'s chunks by ``w``'s as it loads them, and the kernel that
finishes each output tile divides it by the row's RMS, from the squares of
``a``'s chunks (the partial kernel's own, unsplit; the combine's loop over
``a``, split): ``(a / r * w) @ W = ((a * w) @ W) / r`` for a scale ``r``
per row. The normalised rows are never written, and the norm is no kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod

from xdsl.ir import SSAValue

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.builder import BlockGraph

PROLOGUE_KINDS = ("mul", "mul_scalar", "neg", "cast")
"""Ops that may continue a prologue's RMSNorm before the matmul: each scales
the rows linearly (or only changes how they are stored), so the norm's
per-row scale commutes with them and with the matmul."""
PROLOGUE_ROWS = 2
"""Most rows whose RMSNorm the split-K kernels compute themselves: the
multiply-and-sum forms' rows. At more rows the product is a ``tl.dot``,
which would take the scaled chunks from registers each iteration; on an
H100 the norm as a kernel of its own and the plain product took 9.9 µs
where the two in one took 14.3 (2048 x 3072 at 8 rows), 93.7 where they
took 144.2 (4096 x 14336 twice)."""
ROW_TILE = 16384
"""Most elements of ``a`` (all its rows) a combine kernel's block loads in
one for-loop iteration to sum the rows' squares for a prologue (unsplit, the
partial kernel sums the squares of the chunks it loads anyway)."""


@dataclass(frozen=True)
class Prologue:
    """The rows of a skinny matmul as ``rms_norm(source)`` followed by
    ``chain`` (each continuing the one before through its operand ``i`` of
    the pair, the last the matmul's left operand)."""

    norm: t.RmsNormBase
    chain: tuple[tuple[t.TensorOp, int], ...]
    source: SSAValue
    """What the kernels read for the norm's input: the input itself, or what
    a cast widened to fp32 for it (exactly the same values)."""

    def ops(self) -> list[t.TensorOp]:
        """The widening cast (if any), the norm and the chain, in program order."""
        widened = self.norm.input.owner if self.source is not self.norm.input else None
        return [
            *([widened] if isinstance(widened, t.TensorOp) else []),
            self.norm,
            *(op for op, _ in self.chain),
        ]


def _per_column(shape: Sequence[int], rows: Sequence[int]) -> bool:
    """Whether an operand of ``shape`` holds one value per column of a
    ``rows``-shaped tensor (a norm's weight ``[K]``): the same for every row."""
    return (
        0 < len(shape) <= len(rows)
        and shape[-1] == rows[-1]
        and all(d == 1 for d in shape[:-1])
    )


def prologue_of(op: kernel.MatmulOp) -> Prologue | None:
    """The RMSNorm prologue of ``op``'s rows (see the module docstring), or
    None: at most :data:`PROLOGUE_ROWS` rows, the left operand an RMSNorm
    over the last dim continued by :data:`PROLOGUE_KINDS` only, every
    ``mul`` by a per-column operand, each of the rows' shape."""
    rows = t.tensor_shape(op.lhs)
    if prod(rows[:-1]) > PROLOGUE_ROWS:
        return None
    found = _prologue(op.lhs, rows)
    if found is None:
        return None
    source = found.norm.input
    if isinstance(source.owner, kernel.CastOp) and str(t.element_type(source)) == "f32":
        source = source.owner.input  # widening is exact: read the narrow values
    if t.element_type(source) != t.element_type(op.lhs):
        return None  # the rows' chunks go to the matmul in its element type
    return Prologue(found.norm, found.chain, source)


def _prologue(value: SSAValue, rows: Sequence[int]) -> Prologue | None:
    owner = value.owner
    if (
        not isinstance(owner, t.TensorOp)
        or not owner.name.startswith("kernel.")
        or t.tensor_shape(owner.results[0]) != tuple(rows)
    ):
        return None
    if isinstance(owner, t.RmsNormBase):
        return Prologue(owner, (), owner.input)
    if owner.KIND not in PROLOGUE_KINDS:
        return None
    operands = list(owner.operands)
    for i, chained in enumerate(operands):
        others = operands[:i] + operands[i + 1 :]
        if any(
            o is chained or not _per_column(t.tensor_shape(o), rows) for o in others
        ):
            continue
        found = _prologue(chained, rows)
        if found is not None:
            return Prologue(found.norm, (*found.chain, (owner, i)), found.source)
        if owner.KIND != "mul":
            break
    return None


def sum_of_squares(bg: BlockGraph, rows: SSAValue) -> SSAValue:
    """The sum of the squares of each row of the tile ``rows``."""
    return bg.reduction(bg.square(rows), len(t.tensor_shape(rows)) - 1)


def row_scale(
    bg: BlockGraph, squares: SSAValue, width: int, norm: t.RmsNormBase
) -> SSAValue:
    """The RMS of each row from the sum of its ``width`` squares, as ``norm``
    computes it: ``sqrt(mean(rows^2) + eps)``, one value per row."""
    mean = bg.mul_scalar(squares, 1 / width)
    eps = norm.eps_value
    return bg.sqrt(bg.add_scalar(mean, eps) if eps else mean)


def apply_chain(
    bg: BlockGraph,
    value: SSAValue,
    chain: Sequence[tuple[t.TensorOp, int]],
    load: Callable[[SSAValue], SSAValue],
) -> SSAValue:
    """``chain`` applied to ``value`` (the tile each op continues through its
    operand of the pair's index), the other operands read by ``load``. A cast
    only changes how a value would be stored: the block computes in fp32, so
    it is no block op."""
    for op, i in chain:
        if op.KIND == "cast":
            continue
        args = [value if j == i else load(v) for j, v in enumerate(op.operands)]
        new = block.ELEMENTWISE_OPS[op.KIND](*args, *op.constant_args())
        bg.block.add_op(new)
        value = new.results[0]
    return value
