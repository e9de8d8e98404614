"""Tile-level building blocks of the block-op lowerings.

A :class:`TileRef` names a tile in shared memory (a memref plus, for staged
tiles, the stage index). :class:`Threads` holds a kernel's thread, warp and
lane indices. :class:`TileEnv` is what a lowering sees of the kernel being
built: the builder, the threads and the tile of each value. The helpers here
are the three loop shapes every block op lowers to: a block-stride loop over
a tile's elements (element-wise work), a reduction of rows across a warp with
butterfly shuffles, and a per-thread reduction for short rows. The f32
arithmetic of each element-wise op is its op-table CUDA C formula, built
through :class:`CudaArith`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute, SSAValue

from mirage_xdsl.dialects.gpux import ShflXorOp
from mirage_xdsl.lowering.gpu_builder import GpuBuilder, Ix
from mirage_xdsl.ops import OPS

WARP = 32


@dataclass(frozen=True)
class TileRef:
    """A tile in shared memory: ``mem[*prefix, *index]``."""

    mem: SSAValue
    shape: tuple[int, ...]
    prefix: tuple[Ix, ...] = ()

    @property
    def dtype(self) -> Attribute:
        assert isinstance(self.mem.type, MemRefType)
        return self.mem.type.element_type

    def at(self, index: Sequence[Ix]) -> list[Ix]:
        return [*self.prefix, *index]


@dataclass(frozen=True)
class Threads:
    """Thread coordinates of the running kernel."""

    tid: SSAValue
    warp: SSAValue
    lane: SSAValue
    count: int

    @property
    def warps(self) -> int:
        return self.count // WARP


class TileEnv(Protocol):
    """The kernel being built, as the op lowerings use it (``KernelLowering``)."""

    b: GpuBuilder
    threads: Threads

    def tile(self, value: SSAValue) -> TileRef: ...


def dims(ty: Attribute) -> tuple[int, ...]:
    """The static shape of a tensor or memref type."""
    return tuple(ty.get_shape())  # type: ignore[attr-defined]


def broadcast_index(index: Sequence[Ix], shape: Sequence[int]) -> list[Ix]:
    """The element of a (broadcast) operand that output element ``index`` reads."""
    return [i if s > 1 else 0 for i, s in zip(index, shape, strict=True)]


def numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def for_each_element(
    b: GpuBuilder,
    threads: Threads,
    shape: Sequence[int],
    body: Callable[[list[Ix]], None],
) -> None:
    """Every element of ``shape`` once, spread over the block's threads."""

    def visit(flat: Ix) -> None:
        body(b.unravel(flat, shape))

    b.strided(threads.tid, numel(shape), threads.count, visit)


def load(b: GpuBuilder, tile: TileRef, index: Sequence[Ix]) -> SSAValue:
    """Element ``index`` of a tile, broadcast along its size-1 dims, as f32."""
    return b.load_f32(tile.mem, tile.at(broadcast_index(index, tile.shape)))


def store(b: GpuBuilder, value: SSAValue, tile: TileRef, index: Sequence[Ix]) -> None:
    b.store_f32(value, tile.mem, tile.at(index))


def warp_allreduce(
    b: GpuBuilder, value: SSAValue, combine: Callable[..., SSAValue] = GpuBuilder.addf
) -> SSAValue:
    """Sum (or another ``combine``, such as ``maxf``) over the 32 lanes of a
    warp; every lane gets the result."""
    mask = WARP // 2
    while mask:
        value = combine(b, value, b.value(ShflXorOp(value, mask)))
        mask //= 2
    return value


def reduce_rows(
    b: GpuBuilder,
    threads: Threads,
    src: TileRef,
    dim: int,
    finish: Callable[[list[Ix], SSAValue, SSAValue | None], None],
    square: bool = False,
    maximum: bool = False,
) -> None:
    """Sum (of squares), or with ``maximum`` the maximum, of ``src`` along
    ``dim`` for every other index.

    Long rows (>= 32 elements) go to one warp each: lanes stride the row and
    a butterfly shuffle combines them, so every lane ends with the total.
    Short rows go to one thread each. ``finish(index, total, lane)`` consumes
    each total (``index`` has 0 at ``dim``; ``lane`` is the lane id in the warp
    mode, ``None`` when one thread owns the row). A maximum starts from the
    first element each thread reads (every lane reads one: rows in warp mode
    have at least 32), so no infinity is needed.
    """
    length = src.shape[dim]
    rows_shape = [1 if d == dim else s for d, s in enumerate(src.shape)]
    combine = GpuBuilder.maxf if maximum else GpuBuilder.addf

    def element(index: list[Ix], j: Ix) -> SSAValue:
        at = list(index)
        at[dim] = j
        x = load(b, src, at)
        return b.mulf(x, x) if square else x

    def row_sum(index: list[Ix], start: Ix, step: int) -> SSAValue:
        def add(j: SSAValue, acc: Sequence[SSAValue]) -> Sequence[SSAValue]:
            return [combine(b, acc[0], element(index, j))]

        if maximum:
            first = element(index, start)
            (total,) = b.loop(b.add(start, step), length, step, add, [first])
        else:
            (total,) = b.loop(start, length, step, add, [b.f32(0.0)])
        return total

    if length >= WARP:

        def per_warp(row: Ix) -> None:
            index = b.unravel(row, rows_shape)
            total = warp_allreduce(b, row_sum(index, threads.lane, WARP), combine)
            finish(index, total, threads.lane)

        b.strided(threads.warp, numel(rows_shape), threads.warps, per_warp)
    else:

        def per_thread(row: Ix) -> None:
            index = b.unravel(row, rows_shape)
            finish(index, row_sum(index, 0, 1), None)

        b.strided(threads.tid, numel(rows_shape), threads.count, per_thread)


def first_lane(b: GpuBuilder, lane: SSAValue | None) -> SSAValue | None:
    """Condition for the one lane of a warp that writes a row result."""
    if lane is None:
        return None
    return b.value(arith.CmpiOp(lane, b.index(0), "eq"))


class CudaArith:
    """The op table's :class:`~mirage_xdsl.ops.Arith` over a :class:`GpuBuilder`:
    each step of an op's ``cuda`` formula appends the f32 op computing it."""

    def __init__(self, b: GpuBuilder):
        self.b = b

    def const(self, c: float, like: SSAValue) -> SSAValue:
        return self.b.f32(c)

    def add(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.b.addf(x, y)

    def mul(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.b.mulf(x, y)

    def div(self, x: SSAValue, y: SSAValue) -> SSAValue:
        """``x / y``, and 0 where ``x`` is 0 (``ops.table.quotient``)."""
        zero = self.b.f32(0.0)
        return self.b.select(self.b.cmpf(x, zero, "oeq"), zero, self.b.divf(x, y))

    def neg(self, x: SSAValue) -> SSAValue:
        return self.b.negf(x)

    def max(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self.b.maxf(x, y)

    def exp(self, x: SSAValue) -> SSAValue:
        return self.b.exp(x)

    def math(self, name: str, x: SSAValue) -> SSAValue:
        return self.b.math(name, x)

    def keyed(self, kind: str, x: SSAValue) -> SSAValue:
        raise NotImplementedError(f"'{kind}' has no CUDA C formula")


def compute(b: GpuBuilder, kind: str, *args: SSAValue | float) -> SSAValue:
    """The f32 result of element-wise ``kind`` on ``args`` (its operands, then
    a scalar op's constant): the op table's CUDA C formula, built with ``b``."""
    formula = OPS[kind].cuda
    assert formula is not None, kind
    return formula(CudaArith(b), *args)


def element_fn(op: Any) -> Callable[..., SSAValue]:
    """The per-element f32 function ``(b, *operands)`` of an element-wise op,
    with its constant (if any) bound."""
    constants = op.constant_args()
    return lambda b, *args: compute(b, op.KIND, *args, *constants)
