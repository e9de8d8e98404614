"""The superoptimizer: generate, prune, verify and rank µGraphs.

``superoptimize(module, **options)`` rewrites every kernel-level function of
a module into the best verified µGraph found; see ``docs/search.md``.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, fields, replace
from typing import Any, TextIO

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.search import cost_model
from mirage_xdsl.search.budget import MIN_SECONDS, Shares, search_order, weights
from mirage_xdsl.search.dispatch import executing, shared_pool
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.partition import Segment, needs_partition, partition, stitch
from mirage_xdsl.search.progress import Progress
from mirage_xdsl.search.prologue import (
    Prologue,
    ProloguedMeasure,
    prologue_of,
    restricted,
)
from mirage_xdsl.search.squeeze import squeeze
from mirage_xdsl.search.superoptimizer import (
    Measure,
    Outcome,
    Report,
    enumerable,
    superoptimize_function,
)
from mirage_xdsl.search.ugraph import from_function

SEARCHABLE_PREFIX = "kernel."


def searchable(fn: func.FuncOp) -> bool:
    """A function of library kernel ops only (nothing customized yet)."""
    ops = [op for op in fn.body.block.ops if not isinstance(op, func.ReturnOp)]
    return bool(ops) and all(
        op.name.startswith(SEARCHABLE_PREFIX) and op.name != "kernel.customized"
        for op in ops
    )


def option_names() -> frozenset[str]:
    """The options :func:`make_options` takes: :class:`SearchOptions`'s fields."""
    return frozenset(f.name for f in fields(SearchOptions))


def make_options(**options: Any) -> SearchOptions:
    unknown = sorted(set(options) - option_names())
    if unknown:
        raise TypeError(f"unknown superoptimize option(s): {', '.join(unknown)}")
    return SearchOptions(**options)


def superoptimize_module(
    module: ModuleOp,
    options: SearchOptions,
    measure: Measure | None = None,
    cache_dir: str | None = None,
    log: TextIO | None = sys.stderr,
) -> list[Report]:
    """Rewrite each searchable function of ``module`` in place (each searched
    without the reshapes that only insert size-1 dims, ``squeeze.py``)."""
    reports: list[Report] = []
    for fn in [op for op in module.ops if isinstance(op, func.FuncOp)]:
        if not searchable(fn):
            continue
        program = fn.clone()
        squeeze(program)
        if needs_partition(program, options.segment_ops):
            new = _by_segments(program, options, measure, cache_dir, log, reports)
        else:
            outcome: Outcome = superoptimize_function(
                program, options, measure, cache_dir
            )
            new = outcome.function
            if log is not None:
                print(outcome.report.summary(), file=log)
            reports.append(outcome.report)
        new.sym_name = fn.sym_name
        module.body.block.insert_op_before(new, fn)
        fn.detach()
        fn.erase()
    return reports


def _by_segments(
    fn: func.FuncOp,
    options: SearchOptions,
    measure: Measure | None,
    cache_dir: str | None,
    log: TextIO | None,
    reports: list[Report],
) -> func.FuncOp:
    """Search each segment of ``fn`` (``partition.py``) on its share of the
    budget (:class:`~budget.Shares`, by :func:`work`), the largest shares
    first (:func:`search_order`)."""
    pieces = partition(fn, options.segment_ops)
    segments = [p for p in pieces if isinstance(p, Segment)]
    layouts = len(pieces) - len(segments)
    weighted = weights([work(s.function) for s in segments])
    order = search_order(weighted)
    shares = Shares(
        time.monotonic() + options.budget,
        tuple(weighted[i] for i in order),
        options.budget,
    )
    if log is not None:
        print(
            f"superoptimize @{fn.sym_name.data}: {len(segments)} segment(s) "
            f"searched one by one, the largest shares first, {layouts} layout "
            "op(s) kept between them; shares of the budget: "
            + ", ".join(f"{w:.0%}" for w in weighted),
            file=log,
        )
    progress = Progress()
    found: list[func.FuncOp] = [segment.function for segment in segments]
    with shared_pool(options):
        for k, i in enumerate(order):
            search = _Segment(k, len(segments), shares, options, measure, cache_dir)
            prologue = prologue_of(segments[i].inputs)
            found[i] = search.run(
                segments[i].function, progress, log, reports, prologue
            )
    progress.close()
    return stitch(fn, pieces, found)


def work(fn: func.FuncOp) -> float:
    """How much searching a segment is worth, relative to the others: its
    arithmetic ops (the search's space grows with them) times one plus its
    input's cost in :data:`COST_UNIT` (where the time goes, and what a
    better µGraph saves); nothing for a segment the generator cannot search
    (its default builds take no time)."""
    graph = from_function(fn)
    if not enumerable(graph):
        return 0.0
    ops = sum(1 for op in fn.body.block.ops if not isinstance(op, func.ReturnOp))
    return ops * (1.0 + cost_model.cost(graph) / COST_UNIT)


COST_UNIT = 10e-6
"""Seconds of input cost that double a segment's :func:`work`: a 10 µs
projection is worth twice the search of a 1 µs element-wise tail of as many
ops."""

WHOLE_FIRST = 0.6
"""Of a segment's share, the part its whole search gets when its stages
(``partition.stages``) may be searched after it; they get the rest, each
stage at least its part of it even where the whole search overran (timing
its input can take longer than the search), which the later segments'
shares then give up."""


@dataclass(frozen=True)
class _Segment:
    """The search of segment ``index`` of ``count``, on its share of the
    function's budget; progress lines name the segment, its share and the
    best cost so far."""

    index: int
    count: int
    shares: Shares
    options: SearchOptions
    measure: Measure | None
    cache_dir: str | None

    def run(
        self,
        fn: func.FuncOp,
        progress: Progress,
        log: TextIO | None,
        reports: list[Report],
        prologue: Prologue | None = None,
    ) -> func.FuncOp:
        """The segment searched; if nothing beats its input and it has
        stages, the stages searched one by one on the rest of its share, and
        whichever of the two is faster kept (so the result is never slower
        than the segment's own search, whose pool holds the default builds).
        A GPU times each behind the input transposes in front of it
        (``prologue.py``)."""
        stages = partition(fn, self.options.segment_ops, by_stage=True)
        staged = len(stages) > 1
        share = self.shares.share(self.index)
        guaranteed = self.shares.guaranteed(self.index)
        end = time.monotonic() + share
        whole = WHOLE_FIRST if staged else 1.0
        outcome = self._search(
            fn,
            share * whole,
            progress,
            prologue,
            None if guaranteed is None else guaranteed * whole,
        )
        _record(outcome.report, log, reports)
        if not staged or _improved(outcome.report):
            return outcome.function
        if log is not None:
            print(
                f"superoptimize @{fn.sym_name.data}: nothing better found; its "
                f"{len(stages)} stages searched one by one",
                file=log,
            )
        found, total = [], 0.0
        kept = share * (1.0 - WHOLE_FIRST) / len(stages)
        for i, piece in enumerate(stages):
            assert isinstance(piece, Segment)
            left = max(end - time.monotonic(), 0.0)
            stage = self._search(
                piece.function,
                max(left / (len(stages) - i), kept, MIN_SECONDS),
                progress,
                restricted(prologue, piece.inputs),
                None
                if guaranteed is None
                else guaranteed * (1.0 - WHOLE_FIRST) / len(stages),
            )
            _record(stage.report, log, reports)
            found.append(stage.function)
            total += _time_of(stage.report)
        best = _time_of(outcome.report)
        if total >= best:
            return outcome.function
        stitched = stitch(fn, stages, found)
        together = self._timed(stitched, prologue) if time.monotonic() < end else None
        if together is None:
            return stitched
        if log is not None:
            print(
                f"superoptimize @{fn.sym_name.data}: its stages timed as one "
                f"program: {together * 1e6:.1f} us ({total * 1e6:.1f} us apart), "
                f"the segment's own pick {best * 1e6:.1f} us",
                file=log,
            )
        return stitched if together < best else outcome.function

    def _timed(self, fn: func.FuncOp, prologue: Prologue | None) -> float | None:
        """Seconds per call of ``fn`` timed as one program behind
        ``prologue``, as the segment's input was: stages timed apart each
        pay a launch and a cold start the program may overlap or not, so
        their sum only estimates it, and two stages of a near tie (a norm
        kernel before a projection that could have read the norm itself)
        must not win on it. None where the search does not measure, or the
        device's figure cannot be trusted (and, by the caller, where the
        segment's share is spent)."""
        measure = self._measure_behind(prologue)
        if measure is None:
            return None
        seconds = measure(ModuleOp([fn.clone()]))
        if getattr(measure, "fallback", "") or not 0.0 < seconds < math.inf:
            return None
        return seconds

    def _measure_behind(self, prologue: Prologue | None):
        """The search's measure, timing each module behind ``prologue`` (the
        transposes of program inputs in front of the segment); None where
        the search does not measure."""
        if self.measure is None or prologue is None:
            return self.measure
        return ProloguedMeasure(self.measure, prologue)

    def _search(
        self,
        fn: func.FuncOp,
        budget: float,
        progress: Progress,
        prologue: Prologue | None = None,
        served_by: float | None = None,
    ):
        measure = self._measure_behind(prologue)
        progress.stage = (
            f"segment {self.index + 1}/{self.count} @{fn.sym_name.data} "
            f"({budget:.1f} s, {self.shares.weights[self.index]:.0%} of the budget)"
        )
        return superoptimize_function(
            fn,
            replace(self.options, budget=budget),
            measure,
            self.cache_dir,
            progress,
            served_by,
        )


def _record(report: Report, log: TextIO | None, reports: list[Report]) -> None:
    if log is not None:
        print(report.summary(), file=log)
    reports.append(report)


def _improved(report: Report) -> bool:
    """Whether a search chose something other than its input."""
    return report.best_cost < report.input_cost or any(
        m.get("chosen") and not m.get("input") for m in report.measured
    )


def _time_of(report: Report) -> float:
    """Seconds per call of what a search chose: measured when it was timed,
    else the cost model's figure."""
    chosen = [m for m in report.measured if m.get("chosen")]
    if chosen and chosen[0].get("time_us") is not None:
        return chosen[0]["time_us"] * 1e-6
    return report.best_cost


def superoptimize(
    module: ModuleOp,
    *,
    measure: Callable[[ModuleOp], float] | None = None,
    cache_dir: str | None = None,
    log: TextIO | None = sys.stderr,
    executor: Executor | None = None,
    **options: Any,
) -> ModuleOp:
    """A copy of ``module`` with every kernel-level function superoptimized.

    ``options`` are the fields of :class:`SearchOptions` (``budget``,
    ``max_ops``, ``griddims``, ...); ``measure`` times a candidate module on
    the device and then decides the ranking instead of the cost model;
    ``executor`` (a ``concurrent.futures.Executor``, such as a Dask client's
    ``get_executor()``) runs the search's tasks instead of local processes.
    """
    out = module.clone()
    with executing(executor):
        superoptimize_module(out, make_options(**options), measure, cache_dir, log)
    return out


__all__ = ["Report", "SearchOptions", "superoptimize", "superoptimize_module"]
