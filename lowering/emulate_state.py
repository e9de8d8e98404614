"""The state of one emulated launch, and the memory model that finds races.

Device tensors are numpy arrays (:class:`GlobalRef`); a block's dynamic
shared memory is a byte array per block, and a tile in it is an offset and
strides (:class:`SharedRef`). :class:`Launch` also tracks, per 2-byte unit
of shared memory, the thread that last wrote and last read it and the
barrier epoch of each, so :meth:`Launch.read` and :meth:`Launch.write` can
report a race as :class:`EmulationError`: a read of a unit another thread
wrote, or a write over a unit another thread read or wrote, with no
``__syncthreads`` in between. ``cp.async`` copies wait in :attr:`Launch.pending`
and :attr:`Launch.groups` until a ``wait_group`` lands them.

numpy has no bfloat16, so bf16 memory (device tensors and shared tiles) holds
the raw 16 bits as ``uint16`` (:data:`BF16_STORAGE`): every read widens them to
float32 exactly and every write rounds float32 to nearest even, as
``cvt.f32.bf16`` and ``cvt.rn.bf16.f32`` do on the GPU (:func:`stored`,
:func:`loaded`).

:class:`LaneEnv` is what the op rules (``emulate_ops.py``,
``emulate_warp.py``) see of the emulator (``emulate.py``), so they need not
import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type
from xdsl.ir import Attribute, Block, Operation, SSAValue

UNIT = 2
"""Bytes per tracked shared-memory unit."""


class EmulationError(Exception):
    """The kernel did something a GPU would get wrong (a race, an early read)."""


BF16_STORAGE = np.uint16
"""The numpy type of bf16 memory: its bits (no other element type is an integer)."""
BF16_NAN = 0x7FFF
"""The NaN ``cvt.rn.bf16.f32`` makes of a NaN, and what unwritten bf16 memory holds."""


def np_dtype(ty: Attribute) -> type:
    """The numpy type memory of element type ``ty`` is stored as."""
    if isinstance(ty, Float16Type):
        return np.float16
    if isinstance(ty, BFloat16Type):
        return BF16_STORAGE
    if isinstance(ty, Float32Type):
        return np.float32
    raise NotImplementedError(f"no numpy type for {ty}")


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """The bf16 nearest each float32 (ties to even), as its 16 bits.

    Rounding to the upper 16 bits adds ``0x7FFF`` plus the lowest kept bit, so a
    tie carries only into an odd half; a carry out of the mantissa bumps the
    exponent (and the largest finite values round to infinity), as on the GPU.
    """
    f = np.asarray(x, np.float32)
    bits = f.view(np.uint32)  # same item size: any layout, any shape
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16
    return np.where(np.isnan(f), BF16_NAN, rounded).astype(BF16_STORAGE)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """bf16 bits widened to float32, exactly (the low 16 bits are zero)."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bf16, still float32: ``arith.truncf`` to bf16."""
    return bf16_values(bf16_bits(x))


def stored(values: np.ndarray, dtype: type) -> np.ndarray:
    """``values`` as memory of numpy type ``dtype`` holds them."""
    if np.dtype(dtype) == BF16_STORAGE:
        return bf16_bits(values)
    return np.asarray(values).astype(dtype)


def loaded(raw: np.ndarray) -> np.ndarray:
    """Elements read from memory as values: bf16 bits widen to float32."""
    return bf16_values(raw) if raw.dtype == BF16_STORAGE else raw


def unwritten(shape: Sequence[int], ty: Attribute) -> np.ndarray:
    """Device memory of element type ``ty`` before any write: all NaN."""
    dtype = np_dtype(ty)
    fill = BF16_NAN if np.dtype(dtype) == BF16_STORAGE else np.nan
    return np.full(tuple(shape), fill, dtype)


@dataclass
class GlobalRef:
    array: np.ndarray
    strides: list[int]


@dataclass
class SharedRef:
    offset: int
    dtype: type
    strides: list[int]


def unit_span(
    ref: SharedRef, lin: np.ndarray, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """(block, first unit) and the unit span of ``count`` elements at ``lin``."""
    size = np.dtype(ref.dtype).itemsize
    start = (ref.offset + lin * size) // UNIT
    return start, np.arange(count * size // UNIT)


@dataclass
class Launch:
    """State of one kernel launch."""

    lanes: int
    threads: int
    block_of: np.ndarray
    tid: np.ndarray
    block_ids: dict[str, np.ndarray]
    shared: np.ndarray
    writer: np.ndarray
    reader: np.ndarray
    write_epoch: np.ndarray
    read_epoch: np.ndarray
    epoch: int = 0
    groups: list[list[tuple]] = field(default_factory=list)
    pending: list[tuple] = field(default_factory=list)

    def shared_view(self, dtype: type) -> np.ndarray:
        return self.shared.view(dtype)

    def read(
        self,
        ref,
        lin: np.ndarray,
        mask: np.ndarray,
        count: int = 1,
        collective: bool = False,
    ) -> np.ndarray:
        """Elements ``lin .. lin + count`` for each lane (inactive lanes read index 0)."""
        span = np.arange(count)
        lin = np.where(mask, lin, 0)
        if isinstance(ref, GlobalRef):
            return loaded(ref.array[lin[:, None] + span])
        size = np.dtype(ref.dtype).itemsize
        idx = (ref.offset // size + lin)[:, None] + span
        out = loaded(self.shared_view(ref.dtype)[self.block_of[:, None], idx])
        act = np.nonzero(mask)[0]
        first, units = unit_span(ref, lin[act], count)
        u = first[:, None] + units
        b = self.block_of[act][:, None]
        tid = self.tid[act][:, None]
        fresh = self.write_epoch[b, u] == self.epoch
        if not collective:
            fresh &= self.writer[b, u] != tid
        if np.any(fresh):
            raise EmulationError(
                "race: a thread reads shared memory another thread wrote "
                "without a barrier in between"
            )
        b, u, tid = np.broadcast_arrays(b, u, tid)
        self.read_epoch[b, u] = self.epoch
        self.reader[b, u] = tid
        return out

    def write(self, ref, lin: np.ndarray, values: np.ndarray, mask: np.ndarray) -> None:
        """Store ``values`` (``(lanes, count)``) at ``lin ..`` for active lanes."""
        count = values.shape[1]
        span = np.arange(count)
        if isinstance(ref, GlobalRef):
            idx = lin[mask][:, None] + span
            ref.array[idx] = stored(values[mask], ref.array.dtype)
            return
        size = np.dtype(ref.dtype).itemsize
        idx = (ref.offset // size + lin[mask])[:, None] + span
        self.shared_view(ref.dtype)[self.block_of[mask][:, None], idx] = stored(
            values[mask], ref.dtype
        )
        first, units = unit_span(ref, lin[mask], count)
        u = first[:, None] + units
        b = self.block_of[mask][:, None]
        tid = self.tid[mask][:, None]
        if np.any((self.read_epoch[b, u] == self.epoch) & (self.reader[b, u] != tid)):
            raise EmulationError(
                "race: a thread overwrites shared memory another thread read without a barrier in between"
            )
        if np.any((self.write_epoch[b, u] == self.epoch) & (self.writer[b, u] != tid)):
            raise EmulationError(
                "race: two threads write the same shared memory without a barrier in between"
            )
        bb, uu = np.broadcast_arrays(b, u)
        self.writer[bb, uu] = np.broadcast_to(tid, u.shape)
        self.write_epoch[bb, uu] = self.epoch


class LaneEnv(Protocol):
    """What an op rule sees of the emulator: SSA values over lanes, memory."""

    state: Launch
    values: dict[SSAValue, object]
    thread_xyz: dict[str, np.ndarray]

    def __getitem__(self, v: SSAValue) -> Any: ...

    def set(self, op: Operation, value: object) -> None: ...

    def block(self, block: Block, mask: np.ndarray) -> None: ...

    def linear(self, ref: Any, indices: Sequence[SSAValue]) -> np.ndarray: ...


def as_lanes(e: LaneEnv, x) -> np.ndarray:
    return np.broadcast_to(
        np.asarray(x),
        (e.state.lanes, *np.shape(x)[1:]) if np.ndim(x) > 1 else (e.state.lanes,),
    )
