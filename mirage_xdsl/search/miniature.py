"""The miniature a search runs on: the program with its long axes shortened.

The search is structural, so it runs on a *miniature* of the program: every
axis longer than :data:`MINI_AXIS` is shortened to it (4096 keys become 64),
which keeps fingerprints cheap. Maps follow from labels, not sizes, so a
plan found on the miniature is instantiated at the real shapes afterwards
(``instantiate.py``) and checked there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from xdsl.dialects import func

from mirage_xdsl.search import labels as L
from mirage_xdsl.search.fingerprint import evaluate
from mirage_xdsl.search.ugraph import UGraph, from_function, to_function

MINI_AXIS = 64


def miniature(function: func.FuncOp, axes: L.Axes) -> func.FuncOp:
    """The same program with every long axis shortened to MINI_AXIS."""

    def small(label: L.Label, size: int) -> int:
        if L.is_axis(label) and size > MINI_AXIS and size % MINI_AXIS == 0:
            return MINI_AXIS
        return size

    ug = from_function(function)
    args = function.body.block.args
    inputs = tuple(
        tuple(small(lab, s) for lab, s in zip(axes.labels[a], shape, strict=True))
        for a, shape in zip(args, ug.inputs, strict=True)
    )
    return to_function(replace(ug, inputs=inputs))


def run_library(ug: UGraph, values: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Values of a library-op program's outputs (on the miniature's inputs)."""
    env = list(values)
    for op in ug.ops:
        args = [env[v] for v in op.operands]
        env.append(evaluate(op.kind, args, dict(op.attrs, rank=args[0].ndim)))
    return [env[v] for v in ug.outputs]


__all__ = ["MINI_AXIS", "miniature", "run_library"]
