"""Copies of tiles between device memory and shared memory.

An input tile is copied in with ``cp.async`` (asynchronous, so loads of later
for-loop iterations overlap the computation of earlier ones; plain copies
where a copy would be under 4 bytes); an output tile is copied out with
vectorised stores converting fp32 to the tensor's type. Both copy as many
elements at once as fit 16 bytes and divide the rows of the tile and of the
tensor. Where a tile sits in its device tensor follows the op's ``imap`` or
``omap`` (which grid dim splits which tensor dim) and, for per-iteration
inputs, the for-loop iteration.

An input that reads its source transposed (``block.input``'s ``transpose``)
is copied element by element, the tile's dims walked in the source's order so
that neighbouring threads read neighbouring elements: no vector of the source
is a row of the tile. ``fold-transposes`` therefore leaves the transpose
kernels of a CUDA C program in place (16-byte ``cp.async`` copies on both of
its sides); the scalar copy serves block graphs written with the property.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import SSAValue

from mirage_xdsl.dialects import block
from mirage_xdsl.dialects.gpux import CopyOp, CpAsyncOp
from mirage_xdsl.lowering.gpu_builder import GpuBuilder, Ix
from mirage_xdsl.lowering.tiles import Threads, TileRef, dims, numel


def vector_width(tile_last: int, tensor_last: int, element_bytes: int) -> int:
    """Elements per copy: as fit 16 bytes and divide both rows."""
    width = 16 // element_bytes
    while width > 1 and (tile_last % width or tensor_last % width):
        width //= 2
    return width


def tile_origin(
    b: GpuBuilder,
    o: block.InputOp,
    grid_dims: Sequence[int],
    block_ids: Sequence[Ix],
    iteration: Ix,
) -> list[Ix]:
    """Index of the tile's first element in the device tensor."""
    full = o.viewed_shape
    tile = dims(o.result.type)
    origin: list[Ix] = [0] * len(full)
    if o.window_of is not None:  # the window's first element
        dim, start, _ = o.window_of
        origin[dim + len(full) - len(dims(o.source.type))] = start
    for g, d in enumerate(o.input_map):
        if d != -1:
            per_block = full[d] // grid_dims[g]
            origin[d] = b.add(origin[d], b.mul(block_ids[g], per_block))
    if o.forloop_dim != -1:
        d = o.forloop_dim
        origin[d] = b.add(origin[d], b.mul(iteration, tile[d]))
    return origin


def copy_in(
    b: GpuBuilder,
    threads: Threads,
    src: SSAValue,
    dst: TileRef,
    origin: Sequence[Ix],
    row_start: int = 0,
) -> None:
    """Issue the cp.async copies of one input tile (or plain copies).

    ``src`` is the device tensor, ``origin`` the tile's first element in it
    (in the tile's rank: a lifted tile's leading size-1 dims are dropped);
    ``row_start`` is where a window of the last dim starts.
    """
    assert isinstance(src.type, MemRefType)
    full = dims(src.type)
    lifted = len(dst.shape) - len(full)
    tile = dst.shape
    elem = src.type.element_type.bitwidth // 8  # type: ignore[attr-defined]
    width = vector_width(tile[-1], full[-1], elem)
    while width > 1 and row_start % width:  # copies stay aligned to the window
        width //= 2
    chunks = (*tile[:-1], tile[-1] // width)

    def copy(flat: Ix) -> None:
        index = b.unravel(flat, chunks)
        index[-1] = b.mul(index[-1], width)
        at = [b.add(i, x) for i, x in zip(origin, index, strict=True)][lifted:]
        if width * elem >= 4:
            b.insert(
                CpAsyncOp(
                    dst.mem,
                    [b.index(i) for i in dst.at(index)],
                    src,
                    [b.index(i) for i in at],
                    width * elem,
                )
            )
        else:
            b.store(b.load(src, at), dst.mem, dst.at(index))

    b.strided(threads.tid, numel(chunks), threads.count, copy)


def copy_in_transposed(
    b: GpuBuilder,
    threads: Threads,
    src: SSAValue,
    dst: TileRef,
    origin: Sequence[Ix],
    swapped: tuple[int, int],
) -> None:
    """Plain copies of one input tile read through the source dims
    ``swapped`` (``origin`` and ``dst`` count the dims of the transposed
    view, lifted to the tile's rank): thread ``i`` copies the ``i``-th
    element in the source's order."""
    assert isinstance(src.type, MemRefType)
    tile = dst.shape
    lifted = len(tile) - len(dims(src.type))
    a, c = (d + lifted for d in swapped)
    order = list(range(len(tile)))  # the tile dim of each source dim
    order[a], order[c] = order[c], order[a]

    def copy(flat: Ix) -> None:
        index: list[Ix] = [0] * len(tile)
        walked = b.unravel(flat, [tile[d] for d in order])
        for d, i in zip(order, walked, strict=True):
            index[d] = i
        at = [b.add(o, x) for o, x in zip(origin, index, strict=True)]
        at = [at[d] for d in order][lifted:]
        b.store(b.load(src, at), dst.mem, dst.at(index))

    b.strided(threads.tid, numel(tile), threads.count, copy)


def copy_out(
    b: GpuBuilder,
    threads: Threads,
    o: block.OutputOp,
    src: TileRef,
    result: SSAValue,
    block_ids: Sequence[Ix],
) -> None:
    """Store the output tile ``src`` into the device tensor ``result``, by ``omap``."""
    assert isinstance(result.type, MemRefType)
    full = dims(result.type)
    tile = src.shape
    width = vector_width(tile[-1], full[-1], 2)
    if src.dtype != result.type.element_type:
        width = min(width, 8)
    origin: list[Ix] = [0] * len(full)
    for g, d in enumerate(o.output_map):
        if d != -1:
            origin[d] = b.add(origin[d], b.mul(block_ids[g], tile[d]))
    chunks = (*tile[:-1], tile[-1] // width)

    def copy(flat: Ix) -> None:
        index = b.unravel(flat, chunks)
        index[-1] = b.mul(index[-1], width)
        at = [b.add(i, x) for i, x in zip(origin, index, strict=True)]
        b.insert(
            CopyOp(
                result,
                [b.index(i) for i in at],
                src.mem,
                [b.index(i) for i in src.at(index)],
                width,
            )
        )

    b.strided(threads.tid, numel(chunks), threads.count, copy)
