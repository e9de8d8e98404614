"""The superoptimizer: generate, prune, verify and rank µGraphs.

``superoptimize(module, **options)`` rewrites every kernel-level function of
a module into the best verified µGraph found; see ``docs/search.md``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, fields, replace
from typing import Any, TextIO

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.search.dispatch import executing
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.partition import Segment, needs_partition, partition, stitch
from mirage_xdsl.search.superoptimizer import (
    Measure,
    Outcome,
    Report,
    superoptimize_function,
)

SEARCHABLE_PREFIX = "kernel."


def searchable(fn: func.FuncOp) -> bool:
    """A function of library kernel ops only (nothing customized yet)."""
    ops = [op for op in fn.body.block.ops if not isinstance(op, func.ReturnOp)]
    return bool(ops) and all(
        op.name.startswith(SEARCHABLE_PREFIX) and op.name != "kernel.customized"
        for op in ops
    )


def make_options(**options: Any) -> SearchOptions:
    names = {f.name for f in fields(SearchOptions)}
    unknown = sorted(set(options) - names)
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
    """Rewrite each searchable function of ``module`` in place."""
    reports: list[Report] = []
    for fn in [op for op in module.ops if isinstance(op, func.FuncOp)]:
        if not searchable(fn):
            continue
        if needs_partition(fn, options.segment_ops):
            new = _by_segments(fn, options, measure, cache_dir, log, reports)
        else:
            outcome: Outcome = superoptimize_function(fn, options, measure, cache_dir)
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
    """Search each segment of ``fn`` (``partition.py``) in turn, sharing the
    budget: a segment gets the time left divided by the segments left."""
    pieces = partition(fn, options.segment_ops)
    segments = [p for p in pieces if isinstance(p, Segment)]
    layouts = len(pieces) - len(segments)
    if log is not None:
        print(
            f"superoptimize @{fn.sym_name.data}: {len(segments)} segment(s) "
            f"searched one by one, {layouts} layout op(s) kept between them",
            file=log,
        )
    deadline = time.monotonic() + options.budget
    found = []
    for i, segment in enumerate(segments):
        after = len(segments) - i - 1
        found.append(
            _segment(
                segment.function,
                options,
                _Shares(deadline, after),
                measure,
                cache_dir,
                log,
                reports,
            )
        )
    return stitch(fn, pieces, found)


@dataclass(frozen=True)
class _Shares:
    """The time of a function's search, split as it goes: what is left of it
    divided among the searches still to run, this one and ``after`` more.

    A segment whose search finds nothing is searched again by stages; those
    stages draw on the function's remaining time too, not on what their
    segment's own share left over, which on a slow machine can be nothing."""

    deadline: float
    after: int

    def next(self, these: int = 1) -> float:
        """The budget of the next of ``these`` searches before the rest."""
        left = max(self.deadline - time.monotonic(), 0.0)
        return max(left / (these + self.after), 1.0)


def _segment(
    fn: func.FuncOp,
    options: SearchOptions,
    shares: _Shares,
    measure: Measure | None,
    cache_dir: str | None,
    log: TextIO | None,
    reports: list[Report],
) -> func.FuncOp:
    """One segment searched; if nothing beats its input and it has stages
    (``partition.stages``), the stages searched one by one instead."""
    outcome = superoptimize_function(
        fn, replace(options, budget=shares.next()), measure, cache_dir
    )
    if log is not None:
        print(outcome.report.summary(), file=log)
    reports.append(outcome.report)
    improved = outcome.report.best_cost < outcome.report.input_cost or any(
        m.get("chosen") and not m.get("input") for m in outcome.report.measured
    )
    pieces = partition(fn, options.segment_ops, by_stage=True)
    if improved or len(pieces) < 2:
        return outcome.function
    if log is not None:
        print(
            f"superoptimize @{fn.sym_name.data}: nothing better found; its "
            f"{len(pieces)} stages searched one by one",
            file=log,
        )
    found = []
    for i, piece in enumerate(pieces):
        assert isinstance(piece, Segment)
        budget = shares.next(len(pieces) - i)
        outcome = superoptimize_function(
            piece.function, replace(options, budget=budget), measure, cache_dir
        )
        if log is not None:
            print(outcome.report.summary(), file=log)
        reports.append(outcome.report)
        found.append(outcome.function)
    return stitch(fn, pieces, found)


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
