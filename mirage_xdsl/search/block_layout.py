"""Block layouts and the maps between kernel tensors and block tiles.

A :class:`Layout` fixes what a ``kernel.customized`` op reads and how it is
partitioned: its source tensors, which axis each grid dimension splits, and
which axis (if any) the for-loop walks. imaps and fmaps follow from the labels
(a grid dimension splits its axis in every source that has it and replicates
the others; :func:`input_maps`), the tile a block reads follows from them
(:func:`input_tile`), and :func:`output_map` chooses how a tile is saved back
as a kernel tensor. Concrete grid sizes and loop ranges (:class:`Sizes`) are
chosen when complete candidates (:class:`BlockCandidate`) are instantiated and
costed (``instantiate.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mirage_xdsl.dialects import shapes
from mirage_xdsl.search import labels as L
from mirage_xdsl.search import rules as R
from mirage_xdsl.search.rules import Tensor
from mirage_xdsl.search.ugraph import BlockInput, Op


@dataclass(frozen=True)
class Layout:
    sources: tuple[int, ...]
    grid: tuple[L.Label, ...]
    loop: L.Label | None
    walk_split: bool = False
    """Under a loop over the parts of a split axis, whether sources that are
    not partial walk that axis too, one slice per part. A combining kernel
    then finishes a sum over the same axis alongside the parts (split-K's
    RMS of X next to the partial products of X·W) instead of loading the
    whole row at once."""


@dataclass(frozen=True)
class Sizes:
    grid: tuple[int, int, int]
    forloop: int


@dataclass(frozen=True)
class BlockCandidate:
    """A complete block graph, before concrete sizes are chosen."""

    layout: Layout
    inputs: tuple[BlockInput, ...]
    ops: tuple[Op, ...]
    outputs: tuple[tuple[int, tuple[int, int, int]], ...]


def _dim_of(labels: tuple, token: L.Label) -> int:
    """The dimension carrying ``token`` (an axis or a split part), or -1."""
    for d, label in enumerate(labels):
        if label == token or (label[0] == "s" and L.part_token(label[1]) == token):
            return d
    return -1


def split_axis(layout: Layout) -> L.Label | None:
    """The axis whose slices non-partial sources walk (see ``walk_split``)."""
    if layout.walk_split and layout.loop is not None and L.is_part(layout.loop):
        return layout.loop[1]
    return None


def lift_source(src: Tensor, rank: int) -> Tensor:
    """A source as a tile of ``rank`` reads it: leading size-1 (``UNIT``)
    dims, so tiles inside one block graph have equal ranks."""
    extra = rank - len(src.shape)
    if not extra:
        return src
    shape, labels = (1,) * extra + src.shape, L.lift(src.labels, rank)
    return Tensor(shape, labels, src.expr, src.phase, src.partial, src.producer)


def input_maps(layout: Layout, sources: Sequence[Tensor]) -> tuple[BlockInput, ...]:
    out = []
    walked = split_axis(layout)
    for pos, src in enumerate(sources):
        imap = [-1, -1, -1]
        for g, token in enumerate(layout.grid):
            imap[g] = _dim_of(src.labels, token)
        fmap = _dim_of(src.labels, layout.loop) if layout.loop else -1
        if fmap == -1 and walked is not None and not src.partial:
            fmap = _dim_of(src.labels, walked)
        out.append(BlockInput(pos, tuple(imap), fmap))  # type: ignore[arg-type]
    return tuple(out)


def input_tile(
    m: BlockInput, src: Tensor, sizes: Sizes, loop: L.Label | None = None
) -> Tensor | None:
    """The tile a block reads. A walked split part becomes its inner label; an
    axis walked alongside parts (``walk_split``) takes the loop's own label,
    so only the loop's accumulations may finish it."""
    try:
        shape = shapes.tile_shape(src.shape, m.imap, m.fmap, sizes.grid, sizes.forloop)
    except shapes.ShapeError:
        return None
    labels = list(src.labels)
    phase = R.INVARIANT
    if m.fmap != -1:
        phase = R.LOOP
        if labels[m.fmap][0] == "s":
            labels[m.fmap] = labels[m.fmap][2]
        elif loop is not None and L.is_part(loop):
            labels[m.fmap] = loop
    return Tensor(shape, tuple(labels), src.expr, phase, src.partial)


def output_map(
    layout: Layout, tile: Tensor
) -> tuple[tuple[int, int, int], Tensor] | None:
    """The omap saving a tile, and the kernel tensor it makes; None if unsavable.

    A grid dimension must index a dimension of the tile (the blocks' tiles
    are stitched along it) or split a sum the tile holds part of (the parts
    are written side by side, for a later kernel to add up); otherwise every
    block would write the same tile. Parts go along the last dimension no
    other grid dimension stitches: the last one where it is free (FlashDecoding's
    head dim), the rows where the grid also splits the columns (split-K).
    A part maximum, and a sum relative to it, are written side by side the
    same way (FlashDecoding with the online softmax: each block's maximum
    beside its sums); a tile that still spans the axis its maximum was taken
    over (``exp(s - m)`` itself) is not saved.
    """
    sums = {t for t in tile.partial if not L.is_shift(t)}
    shifts = {t[1] for t in tile.partial if L.is_shift(t)}
    split = sums | shifts
    if tile.phase == R.LOOP or not split <= set(layout.grid):
        return None
    if any(_dim_of(tile.labels, token) != -1 for token in shifts):
        return None
    omap = [-1, -1, -1]
    labels = list(tile.labels)
    partial: set[L.Label] = set()
    stitched = {
        _dim_of(tile.labels, token) for token in layout.grid if token not in split
    }
    for g, token in enumerate(layout.grid):
        if token in split:
            free = [d for d in range(len(labels)) if d not in stitched]
            if partial or not free:
                return None
            d = free[-1]
            labels[d] = L.split(token, labels[d])
            part = L.part_token(token)
            partial |= {part} if token in sums else set()
            partial |= {L.shift(part)} if token in shifts else set()
        else:
            d = _dim_of(tile.labels, token)
            if d == -1:
                return None
        omap[g] = d
    mapped = [d for d in omap if d != -1]
    if len(set(mapped)) != len(mapped):
        return None
    record = Tensor((), tuple(labels), tile.expr, R.INVARIANT, frozenset(partial))
    return tuple(omap), record  # type: ignore[return-value]
