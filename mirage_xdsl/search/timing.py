"""Timing candidates on the device: the measured pool and its clock.

When a GPU decides, the input, the default builds and the search's cheapest
candidates are timed whatever the clock says (the baselines tuned in full),
then more while the deadline allows, each expected to take as long as those
before it (:func:`measured_pick`). Each timed candidate's report entry holds
the wall seconds its build, tuning and timing took (``wall_s``): on the H100's
host, a candidate of the batch-8 decode attention over 4096 keys whose kernel
walks the keys with ``tl.dot`` took 15.0 s, its input of 9 kernels 3.5 s.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Sequence

from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.search.budget import timing_until
from mirage_xdsl.search.report import TIMING, Report
from mirage_xdsl.search.ugraph import UGraph, to_module

Measure = Callable[[ModuleOp], float]
"""Seconds one run of a module takes on the device (lower is better). A
measure may also have ``key`` (what its timings depend on; measured results
are cached under it), ``describe()`` (details of its last timing, with
``failures``: a line per backend that could not build or run it) and
``prepare(modules)`` (given the modules timed whatever the deadline, the input
and the default builds, before the first is timed) and
``fallback`` (why its figures could not be trusted: the cost model chooses)."""

Entry = tuple[float, UGraph]
"""A candidate: its cost by the model, and the µGraph."""


class Timings:
    """The candidates timed so far for one search, in the order timed (the
    input first), with the wall time each took to build, tune and time."""

    def __init__(self, measure: Measure, report: Report) -> None:
        self.measure = measure
        self.report = report
        self.pool: list[Entry] = []
        self.seconds: list[float] = []
        """Each timed candidate's measured time per run."""
        self.spent = 0.0
        """Wall seconds spent getting and timing them."""
        self._ready: dict[int, ModuleOp] = {}
        """Modules compiled ahead, by the position they will be timed at."""

    @property
    def each(self) -> float:
        """Wall seconds a candidate took, on the mean: what the next is
        expected to take."""
        return self.spent / len(self.pool) if self.pool else 0.0

    def prepare(self, entries: Sequence[Entry]) -> None:
        """Compile ``entries``, the next to be timed, ahead together where
        the measure can."""
        if (prepare := getattr(self.measure, "prepare", None)) and entries:
            began = time.monotonic()
            modules = [to_module(graph) for _, graph in entries]
            self._ready = dict(enumerate(modules, len(self.pool)))
            prepare(modules)
            self._spend(time.monotonic() - began)

    def _spend(self, seconds: float, measuring: bool = True) -> None:
        self.spent += seconds
        if measuring:
            phases = self.report.phases
            phases["measure"] = phases.get("measure", 0.0) + seconds

    def time(self, entry: Entry, until: float, getting: float = 0.0) -> None:
        """Time ``entry``, its kernels tuned until ``until`` (a
        ``time.monotonic()`` value; past it the tuner gives them default
        settings). ``getting`` is the seconds it took to get it (verified as
        it was asked for): they count in what the next is expected to take."""
        from mirage_xdsl.ir.printing import module_text

        began = time.monotonic()
        cost, graph = entry
        module = self._ready.pop(len(self.pool), None) or to_module(graph)
        with timing_until(until):
            seconds = self.measure(module)
        late = time.monotonic() > until  # tuned, at least in part, by default
        i = len(self.pool)
        record = {
            "input": i == 0,
            "kernels": graph.kernels,
            "cost_us": cost * 1e6,
            "program": module_text(module),
            **({"past_deadline": True} if late else {}),
        }
        describe = getattr(self.measure, "describe", None)
        record.update(describe() if describe else {"time_us": seconds * 1e6})
        what = "the input" if i == 0 else f"candidate {i} ({graph.kernels} kernels)"
        failures = record.pop("failures", ())
        self.report.failures += [f"{TIMING}{what}: {f}" for f in failures]
        self.report.measured.append(record)
        self.pool.append(entry)
        self.seconds.append(seconds)
        self._spend(getting, measuring=False)
        self._spend(time.monotonic() - began)
        record["wall_s"] = round(getting + time.monotonic() - began, 2)

    def best(self) -> Entry:
        """The fastest timed candidate, marked chosen in the report; the
        cheapest by the model where the device's figures cannot be trusted."""
        best = min(range(len(self.pool)), key=lambda i: (self.seconds[i], i))
        if unmeasured := getattr(self.measure, "fallback", ""):
            # The device's figures could not be trusted (``runtime/timer.py``):
            # the cost model chooses, and the result is not cached as measured.
            self.report.failures.append(f"measured selection: {unmeasured}")
            self.report.stopped = (
                self.report.stopped or "GPU unreliable, the cost model chose"
            )
            best = min(range(len(self.pool)), key=lambda i: self._by_cost(i))
        self.report.measured[best]["chosen"] = True
        self.report.measured_by = str(getattr(self.measure, "key", "measure"))
        return self.pool[best]

    def _by_cost(self, i: int) -> tuple[float, int, int]:
        cost, graph = self.pool[i]
        return cost, graph.kernels, i


def measured_pick(
    pool: list[Entry],
    measure: Measure,
    report: Report,
    deadline: float = math.inf,
    always: int = 1,
    baselines: int = 1,
    more: Iterable[Entry] = (),
) -> Entry:
    """Time every candidate of ``pool`` (the input first), then those ``more``
    gives, and keep the fastest; once the next would end past ``deadline``
    (each is expected to take the mean time of those before it) only the
    first ``always`` (the input, the default builds, the search's cheapest of
    two kernel counts) are still timed, and ``more`` is not asked for
    another (it may verify each as it is asked). Past ``deadline`` the tuner
    gives a candidate's kernels their default settings, but not the first
    ``baselines`` (the input and the default builds). A measure with
    ``prepare`` gets the first ``always`` ahead, to compile them all at
    once. What a measure could not build or run goes to the report's
    ``failures``."""
    timings = Timings(measure, report)
    more = iter(more)
    if time.monotonic() > deadline and len(pool) > always:
        pool = pool[:always]
        report.stopped = report.stopped or "budget"
    # compiled ahead together: only those timed whatever the clock says (the
    # rest build as they are timed, where the deadline can stop them;
    # compiling all ahead took 96 s of the 8B MLP segment's 33 s share)
    timings.prepare(pool[:always])
    pool = list(pool)
    for i in itertools.count():
        # a candidate takes about as long to build and time as those before
        # it (compiling and tuning dominate): stop where the next would overrun
        began = time.monotonic()
        if i >= always and began + timings.each > deadline:
            report.stopped = report.stopped or "budget"
            break
        if i == len(pool):
            following = next(more, None)
            if following is None:
                break
            pool.append(following)
        # past the deadline a candidate's kernels get default settings; the
        # first ``baselines`` are tuned in full whatever the clock says
        until = deadline if i >= baselines else math.inf
        timings.time(pool[i], until, time.monotonic() - began)
    return timings.best()
