"""Piecewise (concatenation) algebra: ops pushed through ``concat`` terms.

Concatenation is the one op whose result is not uniform across its elements,
so it gets a *piecewise* term: ``concat(dim, [(size, piece), ...])`` records
which slice of the concatenated dim holds which piece. Every other op is
pushed through the pieces exactly (element-wise ops slice their operands at
the union of the piece boundaries, reductions over the concatenated dim add
the pieces' sums), so a concat term only ever appears at the top of a term.
The LoRA trick thus gets its true meaning::

    matmul(concat(X, X·A, dim=-1), concat(W, B, dim=0))
      = add(sum(256, mul(X, W)), sum(16, mul(sum(256, mul(X, A)), B)))
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from mirage_xdsl.search.pruning.expr_terms import (
    Expr,
    Shape,
    add,
    concat,
    mul,
    pieces,
    sum_,
)

SLICES_KEPT = 1 << 16
"""Calls of :func:`slice_expr` remembered (terms are immutable and interned,
so a remembered slice is the slice)."""


def _neg(dim: int, rank: int) -> int:
    return dim - rank if dim >= 0 else dim


def boundaries(e: Expr, dim: int) -> list[int]:
    """Piece boundaries of ``e`` along ``dim`` (top-level concat only)."""
    if e.head != "concat" or e.param[0] != dim:
        return []
    out, pos = [], 0
    for size in e.param[1][:-1]:
        pos += size
        out.append(pos)
    return out


@functools.lru_cache(maxsize=SLICES_KEPT)
def slice_expr(e: Expr, dim: int, lo: int, hi: int) -> Expr:
    """The term of ``e[..., lo:hi, ...]`` along ``dim`` (negative).

    Kept for the last :data:`SLICES_KEPT` calls: a block search slices the
    same few piecewise terms again and again (one task of the 1024-key
    masked decode attention's search: 201 280 calls, 308 distinct)."""
    if e.head != "concat":
        return e
    cdim, sizes = e.param
    if cdim != dim:
        return concat(
            cdim,
            [
                (s, slice_expr(a, dim, lo, hi))
                for s, a in zip(sizes, e.args, strict=True)
            ],
        )
    out, pos = [], 0
    for size, piece in zip(sizes, e.args, strict=True):
        a, b = max(lo, pos), min(hi, pos + size)
        if a < b:
            out.append((b - a, slice_expr(piece, dim, a - pos, b - pos)))
        pos += size
    return concat(dim, out)


def _segments(points: set[int], size: int) -> list[tuple[int, int]]:
    cuts = [0, *sorted(p for p in points if 0 < p < size), size]
    return list(zip(cuts, cuts[1:], strict=False))


def with_dim(shape: Shape, dim: int, size: int) -> Shape:
    """``shape`` with ``dim`` resized to ``size``."""
    s = list(shape)
    s[dim] = size
    return tuple(s)


def _split_dim(operands: Sequence[Expr], shapes: Sequence[Shape]) -> int | None:
    """A dim along which some (non-broadcast) operand is piecewise."""
    for e, shape in zip(operands, shapes, strict=True):
        if e.head == "concat" and shape[e.param[0]] != 1:
            return e.param[0]
    return None


def _common_rank(shapes: Sequence[Shape]) -> list[Shape]:
    """``shapes`` with leading size-1 dims up to the highest rank among them
    (dims here count from the back, so the alignment is numpy's)."""
    rank = max(len(shape) for shape in shapes)
    return [(1,) * (rank - len(shape)) + tuple(shape) for shape in shapes]


def pointwise(
    build: Callable[..., Expr], operands: Sequence[Expr], shapes: Sequence[Shape]
) -> Expr:
    """Apply an element-wise op, pushing it through piecewise operands.

    Operands of size 1 along the split dim broadcast and are not sliced; a
    lower-rank operand lines up with the trailing dims (numpy's rules).
    """
    shapes = _common_rank(shapes)
    dim = _split_dim(operands, shapes)
    if dim is None:
        return build(*operands)
    size = max(shape[dim] for shape in shapes)
    points = {
        p
        for e, shape in zip(operands, shapes, strict=True)
        if shape[dim] != 1
        for p in boundaries(e, dim)
    }
    out = []
    for lo, hi in _segments(points, size):
        args = [
            e if shape[dim] == 1 else slice_expr(e, dim, lo, hi)
            for e, shape in zip(operands, shapes, strict=True)
        ]
        sub_shapes = [
            shape if shape[dim] == 1 else with_dim(shape, dim, hi - lo)
            for shape in shapes
        ]
        out.append((hi - lo, pointwise(build, args, sub_shapes)))
    return concat(dim, out)


def reduce(x: Expr, shape: Shape, dim: int) -> Expr:
    """Sum over ``dim``: a piecewise dim adds its pieces' sums."""
    dim = _neg(dim, len(shape))
    if x.head != "concat":
        return sum_(shape[dim], x)
    cdim, sizes = x.param
    parts = [
        reduce(a, with_dim(shape, cdim, s), dim)
        for s, a in zip(sizes, x.args, strict=True)
    ]
    if cdim == dim:
        total = parts[0]
        for p in parts[1:]:
            total = add(total, p)
        return total
    return concat(cdim, list(zip(sizes, parts, strict=True)))


def reduce_max(x: Expr, shape: Shape, dim: int) -> Expr:
    """Maximum over ``dim``: ``max(x)``, pushed through pieces along other
    dims. A row made of pieces along ``dim`` is ``max`` of the pieces added,
    an over-approximation (it forgets their order), which only prunes less."""
    dim = _neg(dim, len(shape))
    if x.head != "concat":
        return Expr("max", (x,))
    cdim, sizes = x.param
    if cdim == dim:
        parts = pieces(x)
        total = parts[0]
        for p in parts[1:]:
            total = add(total, p)
        return Expr("max", (total,))
    parts = [
        reduce_max(a, with_dim(shape, cdim, s), dim)
        for s, a in zip(sizes, x.args, strict=True)
    ]
    return concat(cdim, list(zip(sizes, parts, strict=True)))


def matmul(lhs: Expr, rhs: Expr, lshape: Shape, rshape: Shape) -> Expr:
    """``sum(k, mul(a, b))``, split along whichever dims are piecewise (a
    batch dim of 1, or missing, broadcasts and is not sliced)."""
    lshape, rshape = _common_rank((lshape, rshape))
    for e, side in ((lhs, 0), (rhs, 1)):
        if e.head != "concat":
            continue
        dim = e.param[0]
        contraction = dim == (-1 if side == 0 else -2)
        if contraction:
            continue
        batch = dim < -2 and lshape[dim] == rshape[dim]
        out = []
        pos = 0
        for size, piece in zip(e.param[1], e.args, strict=True):
            if side == 0:
                r = slice_expr(rhs, dim, pos, pos + size) if batch else rhs
                rs = with_dim(rshape, dim, size) if batch else rshape
                part = matmul(piece, r, with_dim(lshape, dim, size), rs)
            else:
                lh = slice_expr(lhs, dim, pos, pos + size) if batch else lhs
                ls = with_dim(lshape, dim, size) if batch else lshape
                part = matmul(lh, piece, ls, with_dim(rshape, dim, size))
            out.append((size, part))
            pos += size
        return concat(dim, out)
    k = lshape[-1]
    points = set(boundaries(lhs, -1)) | set(boundaries(rhs, -2))
    if not points:
        return sum_(k, mul(lhs, rhs))
    total: Expr | None = None
    for lo, hi in _segments(points, k):
        part = matmul(
            slice_expr(lhs, -1, lo, hi),
            slice_expr(rhs, -2, lo, hi),
            with_dim(lshape, -1, hi - lo),
            with_dim(rshape, -2, hi - lo),
        )
        total = part if total is None else add(total, part)
    assert total is not None and len(lshape) >= 2
    return total


def concat_op(a: Expr, b: Expr, ashape: Shape, bshape: Shape, dim: int) -> Expr:
    dim = _neg(dim, len(ashape))
    return concat(dim, [(ashape[dim], a), (bshape[dim], b)])
