"""Shared-memory planning for one kernel: a layout and a byte offset per tile.

Every block-level value that the lowering keeps in shared memory gets a
:class:`TileLayout`: its element type (fp32 for accumulators and everything
computed after the for-loop, else the tensor's own type), a padded row
stride for tiles that tensor cores read with ``ldmatrix`` (8 extra halves per
row, so the eight row addresses of one 8x8 matrix fall in eight different
16-byte bank groups), and the number of pipeline stages for tiles loaded
asynchronously on every for-loop iteration.

Offsets come from liveness over the kernel's schedule (invariant ops, the
accumulator set-up, the loop body, the epilogue, the stores): tiles whose live
ranges do not overlap share bytes. Values read inside the loop but defined
before it stay live for the whole loop, as do accumulators and the staged
input buffers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mirage_xdsl.dialects.gpux import WORKGROUP
from xdsl.dialects.builtin import (
    Float16Type,
    MemRefType,
    StridedLayoutAttr,
    f32,
)
from xdsl.ir import Attribute, SSAValue

ALIGN = 128
"""Tiles start on 128-byte boundaries (a full bank sweep)."""
LDMATRIX_PAD = 8
"""Halves of padding per row of a tile read with ldmatrix (16 bytes)."""


@dataclass(frozen=True)
class TileLayout:
    """How one tile sits in shared memory."""

    shape: tuple[int, ...]
    dtype: Attribute
    pad: int = 0
    """Extra elements after each row (last dim)."""
    stages: int = 0
    """0: a single tile; n: a leading stage dim of size n (pipelined input)."""

    @property
    def strides(self) -> tuple[int, ...]:
        strides = []
        step = 1
        for i, size in enumerate(reversed(self.shape)):
            strides.append(step)
            step *= size + (self.pad if i == 0 else 0)
        strides = strides[::-1]
        return (self.stage_elements, *strides) if self.stages else tuple(strides)

    @property
    def element_bytes(self) -> int:
        return self.dtype.bitwidth // 8  # type: ignore[attr-defined]

    @property
    def stage_elements(self) -> int:
        """Elements one tile spans, rounded up to the alignment."""
        rows = 1
        for d in self.shape[:-1]:
            rows *= d
        count = rows * (self.shape[-1] + self.pad)
        per = ALIGN // self.element_bytes
        return -(-count // per) * per

    @property
    def nbytes(self) -> int:
        return self.stage_elements * self.element_bytes * max(1, self.stages)

    def memref_type(self) -> MemRefType:
        shape = ((self.stages,) if self.stages else ()) + self.shape
        return MemRefType(
            self.dtype,
            shape,
            StridedLayoutAttr(list(self.strides), 0),
            WORKGROUP,
        )


def layout_for(
    shape: Sequence[int], dtype: Attribute, ldmatrix: bool, stages: int = 0
) -> TileLayout:
    pad = (
        LDMATRIX_PAD
        if ldmatrix and isinstance(dtype, Float16Type) and shape[-1] % 8 == 0
        else 0
    )
    return TileLayout(tuple(shape), dtype, pad, stages)


ACCUMULATOR_TYPE = f32


@dataclass(frozen=True)
class Interval:
    start: int
    end: int


def assign_offsets(
    sizes: dict[SSAValue, int], live: dict[SSAValue, Interval]
) -> tuple[dict[SSAValue, int], int]:
    """First-fit offsets: tiles with overlapping live ranges never overlap in bytes.

    Returns the offsets and the total bytes used.
    """
    placed: list[tuple[int, int, Interval]] = []
    offsets: dict[SSAValue, int] = {}
    order = sorted(sizes, key=lambda v: (live[v].start, -sizes[v]))
    for v in order:
        span = live[v]
        busy = sorted(
            (off, off + size)
            for off, size, other in placed
            if other.start <= span.end and span.start <= other.end
        )
        offset = 0
        for lo, hi in busy:
            if offset + sizes[v] <= lo:
                break
            offset = max(offset, -(-hi // ALIGN) * ALIGN)
        offsets[v] = offset
        placed.append((offset, sizes[v], span))
    total = max((off + size for off, size, _ in placed), default=0)
    return offsets, total
