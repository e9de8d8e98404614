"""Generated values: the value ranges every fuzzed program keeps, which op kinds
the generator draws, and :class:`Val`, a value with its interval and phase.

Each value carries an interval that bounds it when every input lies in
``[INPUT_LOW, INPUT_HIGH]`` (all positive, so every op is monotone on it), and
an op is only added when its result stays within ``[VALUE_MIN, VALUE_MAX]``.
So on inputs from :func:`mirage_xdsl.fuzz.programs.random_inputs` the float
interpreter, and fp16 GPU code, give finite, normal values: a wrong result is
a bug, never an overflow.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import SSAValue

from mirage_xdsl.dialects import shapes
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import Phase
from mirage_xdsl.ops import OPS, elementwise_kinds

INPUT_LOW, INPUT_HIGH = 0.5, 1.0
"""Inputs the value intervals assume (see :func:`random_inputs`)."""

VALUE_MIN, VALUE_MAX = 1e-3, 1e4
"""Every intermediate value stays in this range on such inputs (fp16-safe)."""


def fuzzed(kind: str) -> bool:
    """Whether the generator draws ``kind``: every op but the element-wise ones
    without a value interval (:attr:`OpSpec.interval`). ``neg`` has none:
    every value the generator makes is positive (its intervals and the
    fp16-safe range assume so)."""
    spec = OPS[kind]
    return not spec.elementwise or spec.interval is not None


UNFUZZED = frozenset(k for k in elementwise_kinds() if not fuzzed(k))
"""Kinds the generator never draws."""


@dataclass(eq=False)
class Val:
    """A value the generator may use, with its interval and for-loop phase."""

    value: SSAValue
    lo: float
    hi: float
    phase: Phase = Phase.INVARIANT

    @property
    def shape(self) -> tuple[int, ...]:
        return t.tensor_shape(self.value)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def in_range(lo: float, hi: float) -> bool:
    return VALUE_MIN <= lo and hi <= VALUE_MAX


def phases_mix(*phases: Phase) -> bool:
    """Whether values of these phases may meet in one op (see customized.py)."""
    return not {Phase.LOOP, Phase.POST} <= set(phases)


def joint_phase(*phases: Phase) -> Phase:
    return max(phases, key=lambda p: p.value)


def broadcastable(a: Sequence[int], b: Sequence[int]) -> bool:
    """Equal ranks broadcasting along size-1 dims: what every level takes
    (the kernel level's rank broadcasting is not drawn)."""
    if len(a) != len(b):
        return False
    try:
        shapes.broadcast(a, b)
    except shapes.ShapeError:
        return False
    return True
