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
input buffers. Staged inputs get as many stages as fit: up to
:data:`MAX_STAGES`, fewer while the tiles exceed :data:`SHARED_LIMIT`.

The plan only decides; the kernel (``kernel_lowering.py``) allocates the
tiles it describes.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    MemRefType,
    StridedLayoutAttr,
    TensorType,
    f32,
)
from xdsl.ir import Attribute, Operation, SSAValue

from mirage_xdsl.dialects import block
from mirage_xdsl.dialects.block_structure import Phase
from mirage_xdsl.dialects.gpux import WORKGROUP, is_mma_operand
from mirage_xdsl.gpu_target import H100
from mirage_xdsl.lowering.matmul import shapes_allow_tensor_cores
from mirage_xdsl.lowering.schedule import Schedule, is_staged
from mirage_xdsl.lowering.tiles import dims

ALIGN = 128
"""Tiles start on 128-byte boundaries (a full bank sweep)."""
LDMATRIX_PAD = 8
"""Halves of padding per row of a tile read with ldmatrix (16 bytes)."""
SHARED_LIMIT = H100.shared_memory_per_block
"""Dynamic shared memory one block may use on the H100 (opt-in maximum)."""
MAX_STAGES = 3
"""Most pipeline stages of a per-iteration input."""


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
        LDMATRIX_PAD if ldmatrix and is_mma_operand(dtype) and shape[-1] % 8 == 0 else 0
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


def tile_storage(
    ops: Iterable[Operation],
    phases: Mapping[SSAValue, Phase],
    untiled: Container[Operation],
) -> dict[SSAValue, tuple[TileLayout, bool]]:
    """Layout of every value kept in shared memory (stages filled in later).

    Each layout comes with whether the value is a staged input. The results of
    ``untiled`` ops (matmuls fused with their user) get no tile.
    """
    ops = list(ops)
    ldmatrix: set[SSAValue] = set()
    for o in ops:
        if isinstance(o, block.MatmulOp):
            k, n = dims(o.lhs.type)[-1], dims(o.rhs.type)[-1]
            if shapes_allow_tensor_cores(k, n):
                ldmatrix.update((o.lhs, o.rhs))
    out: dict[SSAValue, tuple[TileLayout, bool]] = {}
    for o in ops:
        if isinstance(o, block.OutputOp) or o in untiled:
            continue
        for r in o.results:
            ty = r.type
            assert isinstance(ty, TensorType)
            post = phases[r] == Phase.POST
            dtype = ACCUMULATOR_TYPE if post else ty.element_type
            shape = dims(ty)
            if isinstance(o, block.ForloopAccumOp) and o.shifted:
                # One more column per row holds the shift's running maximum.
                shape = (*shape[:-1], shape[-1] + 1)
            out[r] = (layout_for(shape, dtype, r in ldmatrix), is_staged(o))
    return out


def live_ranges(
    values: Iterable[SSAValue],
    schedule: Schedule,
    epilogues: Mapping[block.MatmulOp, Operation],
) -> dict[SSAValue, Interval]:
    """Live range of each value, in positions of the schedule's running order.

    ``epilogues`` maps a matmul to the user whose result its epilogue writes:
    that result is live from the matmul on.
    """
    pos = {o: i for i, o in enumerate(schedule.order())}
    init, loop_end = schedule.init, schedule.loop_end
    live: dict[SSAValue, Interval] = {}
    for v in values:
        owner = v.owner
        assert isinstance(owner, Operation)
        start = pos[owner]
        producers = [m for m, user in epilogues.items() if user is owner]
        if producers:  # written by the matmul's epilogue
            start = pos[producers[0]]
        uses = [pos[u.operation] for u in v.uses if u.operation in pos]
        end = max(uses, default=start)
        if owner in schedule.loads:
            # All copied by one cp.async group, which lands only at the
            # wait before the first op that may read them.
            start, end = 0, max(end, len(schedule.loads))
        if isinstance(owner, block.ForloopAccumOp) or is_staged(owner):
            start, end = init, max(end, loop_end)
        elif start < init and end > init:
            end = max(end, loop_end)
        live[v] = Interval(start, end)
    return live


@dataclass(frozen=True)
class SharedPlan:
    """Where every tile of one kernel sits in shared memory."""

    stages: int
    """Stages of every staged input."""
    layouts: dict[SSAValue, TileLayout]
    offsets: dict[SSAValue, int]
    total: int
    """Dynamic shared memory of the kernel, in bytes."""


def plan_shared(
    storage: Mapping[SSAValue, tuple[TileLayout, bool]],
    live: dict[SSAValue, Interval],
    forloop: int,
) -> SharedPlan:
    """Offsets for the most stages whose tiles fit in :data:`SHARED_LIMIT`.

    Starts from :data:`MAX_STAGES` (or ``forloop``, the iterations, if fewer)
    and drops one stage at a time; one stage is kept even if it does not fit.
    """
    stages = min(MAX_STAGES, forloop)
    while True:
        layouts = {
            v: TileLayout(lay.shape, lay.dtype, lay.pad, stages if staged else 0)
            for v, (lay, staged) in storage.items()
        }
        offsets, total = assign_offsets(
            {v: lay.nbytes for v, lay in layouts.items()}, live
        )
        if total <= SHARED_LIMIT or stages == 1:
            break
        stages -= 1
    return SharedPlan(stages, layouts, offsets, total)
