"""Register tile shapes for Triton: every block-graph value padded to powers of two.

A Triton tensor has power-of-two extents, and ``tl.dot`` wants at least 16 on
every side. A block graph's tiles have arbitrary extents (a batch-1 row is 1
high, a LoRA rank may be 12). So every value gets a *padded* shape; loads fill
the padding with zeros under a mask, stores mask it away.

Padded extents must agree wherever Triton broadcasts or contracts two tensors,
so they are chosen per *dimension class*: the dims of different values that an
op ties together (an element-wise op ties an operand dim to the result dim of
the same extent; a matmul ties M, N, K and the batch dims; a reduction ties all
but the reduced dim; a transpose ties each result dim to the operand dim it
came from). A class's padded extent is the next power of two of its real
extent, raised to 16 when the class is a dimension of a ``tl.dot``, but for
the rows of batches that share one right operand: those become one 2-d dot,
so only all their rows together must reach 16 (:func:`dot_rows`). The
operand dim of a broadcast (extent 1 against n) is not tied, so it stays
broadcastable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from math import prod

from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.union_find import UnionFind
from mirage_xdsl.ops import ELEMENTWISE, Form, kinds

DOT_MIN = 16
"""``tl.dot`` needs every operand side at least this long."""

FMA_MAX_ELEMENTS = 1 << 14
"""Largest M·K·N product a block may form in registers for the multiply-and-sum
form of a matmul; beyond it only the tensor-core form is offered."""

Dim = tuple[SSAValue, int]

SAME_DIMS = kinds(*ELEMENTWISE, Form.NORM)
"""Kinds whose result dims are their operands' (but for broadcasting)."""


def next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def shape(value: SSAValue) -> tuple[int, ...]:
    return t.tensor_shape(value)


def _tie_same_extent(classes: UnionFind, a: SSAValue, b: SSAValue) -> None:
    """Tie the dims of ``a`` and ``b`` that have equal extents (no broadcast)."""
    for d, (x, y) in enumerate(zip(shape(a), shape(b), strict=True)):
        if x == y:
            classes.union((a, d), (b, d))


def matmul_dims(op: Operation) -> tuple[list[Dim], list[Dim], list[Dim]]:
    """The (M, N, K) dims of a matmul's lhs, rhs and result, as pairs to tie."""
    a, b = op.operands
    c = op.results[0]
    r = len(shape(c))
    m = [(a, r - 2), (c, r - 2)]
    n = [(b, r - 1), (c, r - 1)]
    k = [(a, r - 1), (b, r - 2)]
    return m, n, k


def tie_op(classes: UnionFind, op: Operation) -> None:
    """Record the dims ``op`` ties together."""
    if not op.results:
        return
    kind = getattr(op, "KIND", None)
    result = op.results[0]
    rank = len(shape(result))
    if op.name == "block.forloop_accum":
        keep = range(rank) if op.reduction == "none" else range(rank - 1)  # type: ignore[attr-defined]
        for d in keep:
            classes.union((op.operands[0], d), (result, d))
        for shift in op.operands[1:]:  # one value per row of the input
            for d in range(rank - 1):
                classes.union((shift, d), (op.operands[0], d))
    elif kind in SAME_DIMS:
        for v in op.operands:
            _tie_same_extent(classes, v, result)
    elif kind in t.REDUCE_KINDS:
        dim = op.dim.value.data  # type: ignore[attr-defined]
        for d in range(rank):
            if d != dim:
                classes.union((op.operands[0], d), (result, d))
    elif kind == "concat":
        dim = op.dim.value.data  # type: ignore[attr-defined]
        for v in op.operands:
            for d in range(rank):
                if d != dim and shape(v)[d] == shape(result)[d]:
                    classes.union((v, d), (result, d))
    elif kind == "transpose":
        a, b = op.dims  # type: ignore[attr-defined]
        swap = {a: b, b: a}
        for d in range(rank):
            classes.union((op.operands[0], swap.get(d, d)), (result, d))
    elif kind == "matmul":
        for pair in matmul_dims(op):
            classes.union(*pair)
        for v in op.operands:  # a batch dim of 1 against n broadcasts
            for d in range(rank - 2):
                if shape(v)[d] == shape(result)[d]:
                    classes.union((v, d), (result, d))


def dot_rows(op: Operation, padded: Callable[[Dim], int]) -> int:
    """The least padded M of a tensor-core matmul: :data:`DOT_MIN`, or less
    when its right operand has a single batch, so that its left operand's
    batches become the rows of one 2-d ``tl.dot``
    (``triton_matmul.batched_dot_operands``) and only their product must
    reach :data:`DOT_MIN` (eight batches of one row: two rows each, not 16)."""
    a, b = op.operands
    rank = len(shape(op.results[0]))
    if any(padded((b, d)) > 1 for d in range(rank - 2)):
        return DOT_MIN
    batches = prod(padded((a, d)) for d in range(rank - 2))
    return max(1, DOT_MIN // batches)


def padded_shapes(
    ops: Iterable[Operation],
    dot_ops: Iterable[Operation],
    fma_ops: Iterable[Operation] = (),
) -> dict[SSAValue, tuple[int, ...]]:
    """The padded register shape of every result of ``ops``.

    ``dot_ops`` are the matmuls that run on tensor cores: their M, N and K
    classes are padded to at least :data:`DOT_MIN`. ``fma_ops`` multiply and
    sum: only their K class is. On an H100 with Triton 3.6, the sum of a
    broadcast product over a contraction padded to 4 came out wrong (a 12x3 by
    3x24 product, under every warp count, while Triton's own interpreter
    computes it right); no contraction of 16 or more did.
    """
    ops = list(ops)
    classes = UnionFind()
    for op in ops:
        tie_op(classes, op)
    extent: dict[Dim, int] = {}
    for op in ops:
        for v in op.results:
            for d, n in enumerate(shape(v)):
                root = classes.find((v, d))
                extent[root] = max(extent.get(root, 1), next_pow2(n))
    least: dict[Dim, int] = {}

    def at_least(dim: Dim, n: int) -> None:
        root = classes.find(dim)
        least[root] = max(least.get(root, 1), n)

    for op in dot_ops:
        m, n, k = matmul_dims(op)
        at_least(m[0], dot_rows(op, lambda dim: extent.get(classes.find(dim), 1)))
        at_least(n[0], DOT_MIN)
        at_least(k[0], DOT_MIN)
    for op in fma_ops:
        at_least(matmul_dims(op)[2][0], DOT_MIN)
    return {
        v: tuple(
            max(extent[classes.find((v, d))], least.get(classes.find((v, d)), 1))
            for d in range(len(shape(v)))
        )
        for op in ops
        for v in op.results
    }


def fma_fits(op: Operation) -> bool:
    """Whether the multiply-and-sum form of a matmul suits it: few real rows and
    a small enough product tile."""
    *batch, m, k = shape(op.operands[0])
    n = shape(op.results[0])[-1]
    size = next_pow2(m) * max(next_pow2(k), DOT_MIN) * next_pow2(n)
    for b in batch:
        size *= next_pow2(b)
    return m < DOT_MIN and size <= FMA_MAX_ELEMENTS
