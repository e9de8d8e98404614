"""Fitting the cost model's target numbers to measured times.

The cost model (``cost_model.py``) is a roofline over a handful of numbers:
bandwidths, peak FLOP rates, per-SM bandwidth, launch and load latency, the
cost of a for-loop iteration. Datasheet values rank candidates in the right
direction but misjudge how much a kernel loses to latency and to too few
blocks, which is exactly what separates the candidates of one program. On a
GPU the search times its best candidates (``measure=``); those timings,
with the programs they belong to, are the data this module fits the numbers
to.

The fit minimises the squared log ratio of estimate to measurement (every
candidate weighs the same whether it takes 3 µs or 300 µs), mostly *within*
each program: what a search needs is the order of one program's candidates,
so each sample's log ratio is taken relative to the mean of its program's
(:func:`ranking_error`), with a small weight on the absolute ratio to keep
the figures in µs. The fit is coordinate descent over each number's
logarithm: a few hundred cost-model evaluations, deterministic, with no
solver beyond numpy. Only the numbers in
:data:`FITTED` move; each stays within :data:`SPAN` of its starting value, so
a small sample cannot drive a bandwidth to an absurd figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from mirage_xdsl.search.cost_model import Target, cost
from mirage_xdsl.search.ugraph import UGraph

FITTED = (
    "dram_bandwidth",
    "l2_bandwidth",
    "sm_dram_bandwidth",
    "block_bandwidth",
    "smem_bandwidth_per_sm",
    "tensor_flops",
    "cuda_flops",
    "launch_seconds",
    "load_latency_seconds",
    "iteration_seconds",
)
SPAN = 8.0
"""Each fitted number stays within this factor of its starting value."""
STEPS = (1.0, 0.5, 0.25, 0.1, 0.05, 0.02)
"""Log-space step sizes, coarse to fine."""


@dataclass(frozen=True)
class Sample:
    """One measured candidate: its µGraph, seconds per call, and the program
    it implements (candidates of one program are ranked against each other)."""

    graph: UGraph
    seconds: float
    group: str = ""


ABSOLUTE_WEIGHT = 0.1
"""Weight of the absolute log error beside the within-program one."""


def ranks(values: Sequence[float]) -> np.ndarray:
    order = np.argsort(np.asarray(values), kind="stable")
    r = np.empty(len(values))
    r[order] = np.arange(len(values))
    return r


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Rank correlation (no tie correction; timings are continuous)."""
    if len(xs) < 2:
        return float("nan")
    return float(np.corrcoef(ranks(xs), ranks(ys))[0, 1])


def log_error(target: Target, samples: Sequence[Sample]) -> float:
    """Mean squared log ratio of the model's estimate to the measurement."""
    return float(
        np.mean([math.log(cost(s.graph, target) / s.seconds) ** 2 for s in samples])
    )


def ranking_error(target: Target, samples: Sequence[Sample]) -> float:
    """Mean squared log ratio relative to the program's mean, plus
    :data:`ABSOLUTE_WEIGHT` times :func:`log_error`."""
    ratios = np.array([math.log(cost(s.graph, target) / s.seconds) for s in samples])
    groups = np.array([s.group for s in samples])
    centred = ratios.copy()
    for g in set(groups.tolist()):
        members = groups == g
        centred[members] -= ratios[members].mean()
    return float(np.mean(centred**2) + ABSOLUTE_WEIGHT * np.mean(ratios**2))


def rank_correlation(target: Target, samples: Sequence[Sample]) -> float:
    return spearman(
        [cost(s.graph, target) for s in samples], [s.seconds for s in samples]
    )


def fit(
    samples: Sequence[Sample],
    start: Target,
    names: Sequence[str] = FITTED,
    objective: Callable[[Target, Sequence[Sample]], float] = ranking_error,
) -> Target:
    """The target whose estimates best match ``samples`` (see module docstring)."""
    known = {
        f.name for f in fields(Target) if isinstance(getattr(start, f.name), float)
    }
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"not numbers of the cost model's target: {unknown}")
    origin = {n: math.log(getattr(start, n)) for n in names}
    point = dict(origin)

    def at(p: dict[str, float]) -> Target:
        return replace(start, **{n: math.exp(v) for n, v in p.items()})

    best = objective(at(point), samples)
    bound = math.log(SPAN)
    for step in STEPS:
        improved = True
        while improved:
            improved = False
            for n in names:
                for direction in (1.0, -1.0):
                    trial = dict(point)
                    trial[n] = point[n] + direction * step
                    if abs(trial[n] - origin[n]) > bound:
                        continue
                    value = objective(at(trial), samples)
                    if value < best - 1e-12:
                        best, point, improved = value, trial, True
    return at(point)


__all__ = [
    "FITTED",
    "Sample",
    "fit",
    "log_error",
    "rank_correlation",
    "ranking_error",
    "spearman",
]
