"""Shape rules shared by the dialect verifiers, the builder and the interpreter.

Every level of a µGraph agrees on these rules, so they live in one place:
element-wise broadcasting, batched matmul shapes, and the partition maps that
relate a device tensor to the tile one thread block sees.

Partition maps follow the original project's convention. A map has one entry
per grid dimension (x, y, z): ``imap[g] = d`` means grid dimension ``g`` splits
tensor dimension ``d`` across blocks, and ``-1`` means the tensor is replicated
along that grid dimension. ``fmap = d`` splits tensor dimension ``d`` across
for-loop iterations (``-1``: the whole tensor is loaded on every iteration).
When a grid dimension and the for-loop split the same tensor dimension, the
grid split is the outer one.
"""

from __future__ import annotations

from collections.abc import Sequence

GRID_RANK = 3
"""A grid always has three dimensions (x, y, z), as on a GPU."""

Shape = tuple[int, ...]


class ShapeError(ValueError):
    """A shape rule was violated; the message says which and why."""


def lift(shape: Sequence[int], rank: int) -> Shape:
    """``shape`` with leading size-1 dims up to ``rank``: numpy's alignment of
    a lower-rank operand with the trailing dims of a higher-rank one."""
    if len(shape) > rank:
        raise ShapeError(f"rank {len(shape)} cannot be lifted to rank {rank}")
    return (1,) * (rank - len(shape)) + tuple(shape)


def broadcast(lhs: Sequence[int], rhs: Sequence[int]) -> Shape:
    """Result shape of an element-wise op, by numpy's rules: the lower-rank
    operand is aligned with the trailing dims, and each dim is equal or 1."""
    rank = max(len(lhs), len(rhs))
    out = []
    for i, (a, b) in enumerate(zip(lift(lhs, rank), lift(rhs, rank), strict=True)):
        if a != b and a != 1 and b != 1:
            raise ShapeError(
                f"dimension {i} does not broadcast ({a} vs {b}); "
                "sizes must be equal or one of them 1"
            )
        out.append(max(a, b))
    return tuple(out)


def same_rank(lhs: Sequence[int], rhs: Sequence[int]) -> None:
    """Block and thread tiles broadcast only along size-1 dims of equal rank
    (``block.input`` lifts a lower-rank device tensor's tile)."""
    if len(lhs) != len(rhs):
        raise ShapeError(
            f"operand ranks differ ({len(lhs)} vs {len(rhs)}); inside a block "
            "graph tiles have equal ranks (block.input lifts a lower-rank tensor)"
        )


def matmul(lhs: Sequence[int], rhs: Sequence[int]) -> Shape:
    """Result shape of a matmul over the last two dims, its batch dims (all but
    the last two) broadcast by numpy's rules: a batched input times one
    shared 2-d weight, ``[b, t, k] x [k, n]``, reads the weight once."""
    if len(lhs) < 2 or len(rhs) < 2:
        raise ShapeError("matmul operands need rank >= 2")
    if lhs[-1] != rhs[-2]:
        raise ShapeError(
            f"matmul contraction dims differ (lhs has {lhs[-1]}, rhs has {rhs[-2]})"
        )
    try:
        batch = broadcast(lhs[:-2], rhs[:-2])
    except ShapeError:
        raise ShapeError(
            f"matmul batch dims differ ({list(lhs[:-2])} vs {list(rhs[:-2])}); "
            "they must be equal, 1 or missing"
        ) from None
    return (*batch, lhs[-2], rhs[-1])


def reduce(shape: Sequence[int], dim: int) -> Shape:
    """Result shape of a sum over ``dim``: the dim is kept with size 1."""
    if not 0 <= dim < len(shape):
        raise ShapeError(f"reduction dim {dim} out of range for rank {len(shape)}")
    return tuple(1 if i == dim else s for i, s in enumerate(shape))


def transpose(shape: Sequence[int], dim0: int, dim1: int) -> Shape:
    """Result shape of swapping two distinct dims."""
    for d in (dim0, dim1):
        if not 0 <= d < len(shape):
            raise ShapeError(f"transpose dim {d} out of range for rank {len(shape)}")
    if dim0 == dim1:
        raise ShapeError(f"transpose swaps two distinct dims, got {dim0} twice")
    out = list(shape)
    out[dim0], out[dim1] = out[dim1], out[dim0]
    return tuple(out)


def reshape(shape: Sequence[int], new: Sequence[int]) -> Shape:
    """Result shape of a row-major reshape: the element count is kept."""
    count, new_count = 1, 1
    for s in shape:
        count *= s
    for s in new:
        new_count *= s
    if count != new_count:
        raise ShapeError(f"reshape changes the element count ({count} to {new_count})")
    return tuple(new)


def concat(lhs: Sequence[int], rhs: Sequence[int], dim: int) -> Shape:
    """Result shape of concatenation along ``dim``; other dims must agree."""
    if len(lhs) != len(rhs):
        raise ShapeError(f"concat operand ranks differ ({len(lhs)} vs {len(rhs)})")
    if not 0 <= dim < len(lhs):
        raise ShapeError(f"concat dim {dim} out of range for rank {len(lhs)}")
    for i, (a, b) in enumerate(zip(lhs, rhs, strict=True)):
        if i != dim and a != b:
            raise ShapeError(f"concat operands differ in dimension {i} ({a} vs {b})")
    return tuple(
        a + b if i == dim else a for i, (a, b) in enumerate(zip(lhs, rhs, strict=True))
    )


def expand(shape: Sequence[int], new: Sequence[int]) -> Shape:
    """Result shape of stretching ``shape`` to ``new`` by numpy's rules: each
    dim (aligned at the back) is kept or is 1; missing leading dims are added."""
    if len(new) < len(shape):
        raise ShapeError(
            f"broadcast to rank {len(new)} loses dims of a rank {len(shape)} tensor"
        )
    for i, (a, b) in enumerate(zip(lift(shape, len(new)), new, strict=True)):
        if a != b and a != 1:
            raise ShapeError(
                f"dimension {i} of size {a} cannot be broadcast to {b}; only "
                "size-1 dims stretch"
            )
    return tuple(new)


def slice_(shape: Sequence[int], dim: int, start: int, end: int) -> Shape:
    """Result shape of taking elements ``[start, end)`` of ``dim``."""
    if not 0 <= dim < len(shape):
        raise ShapeError(f"slice dim {dim} out of range for rank {len(shape)}")
    if not 0 <= start < end <= shape[dim]:
        raise ShapeError(
            f"slice [{start}, {end}) of dim {dim} (size {shape[dim]}) is empty "
            "or out of range"
        )
    return tuple(end - start if i == dim else s for i, s in enumerate(shape))


def check_map(
    mapping: Sequence[int], rank: int, grid: Sequence[int], what: str
) -> None:
    """Check an imap/omap: one entry per grid dim, -1 or a distinct tensor dim."""
    if len(mapping) != GRID_RANK:
        raise ShapeError(
            f"{what} needs {GRID_RANK} entries (x, y, z), got {len(mapping)}"
        )
    seen: set[int] = set()
    for g, d in enumerate(mapping):
        if d == -1:
            continue
        if not 0 <= d < rank:
            raise ShapeError(
                f"{what} maps grid dim {g} to tensor dim {d}, out of range for rank {rank}"
            )
        if d in seen:
            raise ShapeError(f"{what} maps two grid dims to tensor dim {d}")
        seen.add(d)


def tile_shape(
    shape: Sequence[int],
    imap: Sequence[int],
    fmap: int,
    grid: Sequence[int],
    forloop_range: int,
) -> Shape:
    """Shape of the tile one block loads on one for-loop iteration."""
    check_map(imap, len(shape), grid, "imap")
    tile = list(shape)
    for g, d in enumerate(imap):
        if d == -1:
            continue
        if tile[d] % grid[g]:
            raise ShapeError(
                f"imap splits dim {d} (size {tile[d]}) across grid dim {g} "
                f"of size {grid[g]}, which does not divide it"
            )
        tile[d] //= grid[g]
    if fmap != -1:
        if not 0 <= fmap < len(shape):
            raise ShapeError(f"fmap dim {fmap} out of range for rank {len(shape)}")
        if tile[fmap] % forloop_range:
            raise ShapeError(
                f"fmap splits dim {fmap} (size {tile[fmap]} per block) across "
                f"{forloop_range} for-loop iterations, which does not divide it"
            )
        tile[fmap] //= forloop_range
    return tuple(tile)


def stitched_shape(
    tile: Sequence[int], omap: Sequence[int], grid: Sequence[int]
) -> Shape:
    """Shape of the device tensor that blocks' output tiles are stitched into.

    Every grid dim of size > 1 must be mapped, else two blocks would write the
    same elements.
    """
    check_map(omap, len(tile), grid, "omap")
    out = list(tile)
    for g, d in enumerate(omap):
        if d == -1:
            if grid[g] > 1:
                raise ShapeError(
                    f"omap leaves grid dim {g} (size {grid[g]}) unmapped, so "
                    f"{grid[g]} blocks would write the same output tile"
                )
            continue
        out[d] *= grid[g]
    return tuple(out)
