"""Concrete sizes: grid dimensions and for-loop ranges for a layout.

The generator decides *what* a kernel partitions (which axis each grid
dimension and the loop split); this module decides *how finely*. Defaults
come from the shapes: a split axis gets tiles of 16 to 128 elements (what
tensor-core mma tiles and shared memory like; down to one in a kernel
without a matmul, :data:`ROW_TILES`), a small axis (heads, batch)
one block per index, and a for-loop that also shares its axis with the grid
walks the rest in tiles of 16 to 256. The cost model then ranks every
combination that divides the dims, fits shared memory and meets the user's
``griddims`` / ``franges`` / map lists.

:func:`instantiate` turns a complete structural µGraph (a :class:`Plan`) into
concrete :class:`~mirage_xdsl.search.ugraph.UGraph` candidates, kernel by
kernel, keeping the cheapest few at each step (a beam: later kernels' shapes
depend on earlier kernels' grids when partial sums are passed on).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mirage_xdsl.dialects import shapes
from mirage_xdsl.gpu_target import H100
from mirage_xdsl.search import labels as L
from mirage_xdsl.search.block_layout import BlockCandidate, Layout, Sizes
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.rules import Tensor
from mirage_xdsl.search.ugraph import (
    BlockGraph,
    KernelOp,
    UGraph,
    block_shapes,
    result_shape,
)

TILES = (128, 64, 32, 16)
ROW_TILES = (8, 4, 2, 1)
"""Extra tiles for a kernel without a matmul. Without a for-loop its block
holds every non-grid axis whole (a row-wise softmax or norm over a
4096-wide row), so only a few rows fit in shared memory at once. With one
(the combine of a FlashDecoding split, summing 16 parts of 256 query rows)
a few rows a block give more blocks and a loop short enough to unroll, so
each block's loads are all in flight together: the GQA combine over 4 rows
a block took 7.09 µs on the H100 where 16 rows took 7.40."""
LOOP_TILES = (256, *TILES)
"""Tiles a for-loop may walk an axis in (its own or one the grid splits too):
256 too, since a block that owns a narrow strip of columns (a
matrix-vector product) keeps memory busy only with deep tiles per
iteration."""
SMALL_AXIS = 16
MAX_BLOCKS = 16384


def label_size(label: L.Label, axis_sizes: dict[L.Label, int]) -> int | None:
    if label == L.UNIT:
        return 1
    if L.is_axis(label):
        return axis_sizes[label]
    if label[0] == "c":
        a, b = label_size(label[1], axis_sizes), label_size(label[2], axis_sizes)
        return None if a is None or b is None else a + b
    return None


def _grid_splits(n: int, whole_rows: bool = False) -> list[int]:
    if n <= SMALL_AXIS:
        return [n]
    tiles = TILES + ROW_TILES if whole_rows else TILES
    return [n // t for t in tiles if n % t == 0 and n // t >= 2]


def _shared_splits(n: int, grid: int) -> list[int]:
    """For-loop ranges over an axis the grid splits too (split-K): each
    block walks its slice in tiles of :data:`LOOP_TILES`, 256 deep at most
    (a narrow weight strip then keeps 32 KB in flight per iteration)."""
    per_block = n // grid
    return [
        per_block // t for t in LOOP_TILES if per_block % t == 0 and per_block // t >= 2
    ]


def smallest_tile(label: L.Label, layout: Layout, axis_sizes: dict) -> int:
    """The fewest elements along a dim labelled ``label`` that any of
    :func:`size_choices` gives a block: one on an axis the grid splits (a
    small axis one index per block; a row-wise kernel's rows as few as one),
    the shortest loop tile on the loop's axis, the whole of any other axis,
    and one for a label that is no plain axis (a bound, never more)."""
    if not L.is_axis(label):
        return 1
    n = axis_sizes[label]
    if label == layout.loop:
        return min(n, min(LOOP_TILES))
    return 1 if label in layout.grid else n


def fits_shared_memory(
    layout: Layout, tensors: Sequence[Tensor], axis_sizes: dict, dtype: str
) -> bool:
    """Whether the layout's sources (of ``tensors``, a prefix's kernel
    tensors), in the smallest tiles its sizes allow
    (:func:`smallest_tile`), fit a block's shared memory together. Every
    block graph reads all of its inputs and holds them at once, so a layout
    that fails this (one block per head holding 1024 keys and 1024 values
    whole) yields no candidate the µGraph optimizer keeps, however long its
    block graphs are searched."""
    elem = 4 if dtype == "f32" else 2
    need = sum(
        elem * math.prod(smallest_tile(lab, layout, axis_sizes) for lab in s.labels)
        for s in (tensors[v] for v in layout.sources)
    )
    return need <= H100.shared_memory_per_block


def most_blocks(layout: Layout, axis_sizes: dict) -> int:
    """The most blocks the layout's grid may hold: a small axis one per
    index, any other in the smallest of :data:`TILES`."""
    sizes = [axis_sizes[t] for t in layout.grid]
    return math.prod(n if n <= SMALL_AXIS else n // min(TILES) for n in sizes)


def _parts(layout: Layout, sources: Sequence[Tensor], sizes: dict) -> int | None:
    """Number of partial results a split-part loop token walks."""
    token = layout.loop
    for src in sources:
        for d, label in enumerate(src.labels):
            if label[0] == "s" and L.part_token(label[1]) == token:
                inner = label_size(label[2], sizes)
                return None if not inner else src.shape[d] // inner
    return None


def size_choices(
    layout: Layout,
    sources: Sequence[Tensor],
    axis_sizes: dict[L.Label, int],
    options: SearchOptions,
    matmul: bool = False,
) -> list[Sizes]:
    """Every (grid, forloop) the layout may use, best-guess first. A block
    graph with a ``matmul`` keeps tiles of 16 or more on split axes (what
    tensor cores need); only one without gets :data:`ROW_TILES`, with a
    for-loop or not."""
    per_token: list[list[tuple[int, int]]] = []
    loop = layout.loop
    for token in layout.grid:
        n = axis_sizes[token]
        if token == loop:
            g_options = [g for g in (2, 4, 8, 16, 32, 64) if n % g == 0]
            per_token.append([(g, r) for g in g_options for r in _shared_splits(n, g)])
        else:
            whole_rows = not matmul
            per_token.append([(g, 0) for g in _grid_splits(n, whole_rows)])
    if loop is None:
        loop_options = [1]
    elif loop in layout.grid:
        loop_options = [0]
    elif L.is_axis(loop):
        n = axis_sizes[loop]
        loop_options = [n // t for t in LOOP_TILES if n % t == 0 and n // t >= 2]
    else:
        parts = _parts(layout, sources, axis_sizes)
        loop_options = [parts] if parts and parts > 1 else []
    out: list[Sizes] = []
    for combo in itertools.product(*per_token, loop_options):
        grid = [g for g, _ in combo[:-1]] + [1] * (3 - len(layout.grid))
        forloop = combo[-1] or max(r for _, r in combo[:-1])
        if numel(grid) > MAX_BLOCKS:
            continue
        sizes = Sizes(tuple(grid), forloop)  # type: ignore[arg-type]
        if options.griddims and sizes.grid not in options.griddims:
            continue
        if options.franges and forloop not in options.franges:
            continue
        out.append(sizes)
    out.sort(key=lambda s: (_preference(s, layout, axis_sizes), s.grid, s.forloop))
    return out


def numel(xs: Sequence[int]) -> int:
    return math.prod(xs)


def _preference(sizes: Sizes, layout: Layout, axis_sizes: dict) -> float:
    """Tiles near 64 and a grid near one wave of the H100's SMs come first."""
    score = abs(math.log2(max(numel(sizes.grid), 1) / H100.sms))
    for g, token in zip(sizes.grid, layout.grid, strict=False):
        if L.is_axis(token) and axis_sizes[token] > SMALL_AXIS:
            tile = axis_sizes[token] // g
            if token == layout.loop:
                tile //= sizes.forloop
            score += abs(math.log2(tile / 64))
    return score


@dataclass(frozen=True)
class Plan:
    """A complete µGraph before sizes: kernel steps and the outputs' tensors."""

    steps: tuple[KernelOp | BlockCandidate, ...]
    operands: tuple[tuple[int, ...], ...]
    outputs: tuple[int, ...]
    labels: tuple[tuple[L.Label, ...], ...]
    """Labels of every kernel tensor (arguments first)."""


def _maps_allowed(graph: BlockGraph, options: SearchOptions) -> bool:
    if options.imaps and any(i.imap not in options.imaps for i in graph.inputs):
        return False
    if options.fmaps and any(i.fmap not in options.fmaps for i in graph.inputs):
        return False
    if options.omaps and any(o not in options.omaps for _, o in graph.outputs):
        return False
    return True


def instantiate(
    plan: Plan,
    name: str,
    dtype: str,
    args: Sequence[Tensor],
    axis_sizes: dict[L.Label, int],
    options: SearchOptions,
    finish: Callable[[UGraph], tuple[float, UGraph] | None],
    beam: int = 6,
) -> list[tuple[float, UGraph]]:
    """The cheapest concrete µGraphs for a plan, by ``finish``'s cost."""
    inputs = tuple(a.shape for a in args)
    states: list[tuple[tuple[KernelOp, ...], list[Tensor]]] = [((), list(args))]
    for step, operands in zip(plan.steps, plan.operands, strict=True):
        grown: list[tuple[float, tuple[KernelOp, ...], list[Tensor]]] = []
        for ops, tensors in states:
            found = _concretize(
                step, operands, tensors, plan.labels, axis_sizes, options, dtype
            )
            for op, results in found:
                new_ops = (*ops, op)
                partial = UGraph(name, dtype, inputs, new_ops, ())
                done = finish(partial)
                if done is not None:
                    grown.append((done[0], new_ops, tensors + results))
        grown.sort(key=lambda x: x[0])
        states = [(ops, ts) for _, ops, ts in grown[:beam]]
    out = []
    for ops, _ in states:
        done = finish(UGraph(name, dtype, inputs, ops, plan.outputs))
        if done is not None:
            out.append(done)
    out.sort(key=lambda x: x[0])
    return out


DOT_MIN = 16
"""``tl.dot`` pads every side of its operands to at least this."""


def _dot_bytes(shape: Sequence[int], elem: int) -> int:
    padded = [max(DOT_MIN, 1 << max(d - 1, 0).bit_length()) for d in shape[-2:]]
    return elem * numel(shape[:-2]) * padded[0] * padded[1]


def dots_fit(graph: BlockGraph, tiles: Sequence[Sequence[int]], elem: int) -> bool:
    """Whether each matmul's operands, padded as tensor cores take them, fit
    a block's shared memory, or are tiles read straight from device memory
    (which the Triton lowering splits along K until they do). A product of a
    computed tile (a normalised row, say) and a whole-K weight strip would
    otherwise be a candidate no Triton kernel can hold."""
    first = len(graph.inputs)
    for op in graph.ops:
        if op.kind != "matmul" or all(v < first for v in op.operands):
            continue
        need = sum(_dot_bytes(tiles[v], elem) for v in op.operands)
        if need > H100.shared_memory_per_block:
            return False
    return True


def _concretize(
    step: KernelOp | BlockCandidate,
    operands: tuple[int, ...],
    tensors: list[Tensor],
    all_labels: tuple[tuple[L.Label, ...], ...],
    axis_sizes: dict[L.Label, int],
    options: SearchOptions,
    dtype: str = "f16",
):
    first_result = len(tensors)
    if isinstance(step, KernelOp):
        shape = result_shape(
            step.kind, [tensors[v].shape for v in operands], step.attrs
        )
        yield step, [Tensor(shape, all_labels[first_result], None)]
        return
    sources = [tensors[v] for v in operands]
    matmul = any(op.kind == "matmul" for op in step.ops)
    for sizes in size_choices(step.layout, sources, axis_sizes, options, matmul):
        graph = BlockGraph(
            sizes.grid, sizes.forloop, step.inputs, step.ops, step.outputs
        )
        if not _maps_allowed(graph, options):
            continue
        try:
            tiles = block_shapes(graph, [s.shape for s in sources])
            if not dots_fit(graph, tiles, 4 if dtype == "f32" else 2):
                continue
            results = [
                Tensor(
                    shapes.stitched_shape(tiles[v], omap, sizes.grid),
                    all_labels[first_result + k],
                    None,
                )
                for k, (v, omap) in enumerate(step.outputs)
            ]
        except shapes.ShapeError:
            continue
        yield KernelOp("customized", operands, (), graph), results
