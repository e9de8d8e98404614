"""A segment whose own search found nothing searches its stages one by one;
their result replaces the segment's pick only where the stitched stages,
timed as one program, are faster (``search._Segment.run``)."""

from __future__ import annotations

import io

import pytest
from xdsl.dialects.builtin import StringAttr

from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.search import SearchOptions, _Segment
from mirage_xdsl.search.budget import Shares
from mirage_xdsl.search.partition import partition
from mirage_xdsl.search.progress import Progress
from mirage_xdsl.search.report import Outcome, Report
from mirage_xdsl.semantics.interpreter import entry_function


def _normed_projection():
    """RMSNorm, then a projection: two stages."""
    g = new_kernel_graph("normed")
    x, w = g.new_input((1, 64)), g.new_input((64, 32))
    g.mark_output(g.matmul(g.rms_norm(x), w))
    return entry_function(g.module())


class Stitched:
    """A measure that times only the stitched stages (their program text
    holds both stages' ops), at ``seconds``."""

    key = "fake"
    fallback = ""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.timed: list[str] = []

    def __call__(self, module) -> float:
        self.timed.append(module_text(module))
        return self.seconds


def _run(measure, monkeypatch):
    fn = _normed_projection()
    assert len(partition(fn, SearchOptions().segment_ops, by_stage=True)) == 2
    times = iter([10e-6, 3e-6, 4e-6])  # the whole segment's pick, then each stage's

    def search(self, f, budget, progress, prologue=None, served_by=None):
        seconds = next(times)
        report = Report(f.sym_name.data, input_cost=seconds, best_cost=seconds)
        report.measured = [{"input": True, "chosen": True, "time_us": seconds * 1e6}]
        picked = f.clone()
        if f is fn:  # the whole segment's pick, told apart by its name
            picked.sym_name = StringAttr("whole_pick")
        return Outcome(None, picked, report)

    monkeypatch.setattr(_Segment, "_search", search)
    segment = _Segment(0, 1, Shares(1e9, (1.0,)), SearchOptions(), measure, None)
    log = io.StringIO()
    found = segment.run(fn, Progress(None), log, [])
    return fn, found, log.getvalue()


@pytest.mark.parametrize("together, stitched", [(12e-6, False), (6e-6, True)])
def test_stages_replace_the_segment_only_when_faster_timed_together(
    together, stitched, monkeypatch
) -> None:
    """Apart the stages sum to 7 µs against the segment's 10; timed as one
    program they take 12 µs (the segment's pick stays) or 6 (they win)."""
    measure = Stitched(together)
    fn, found, log = _run(measure, monkeypatch)
    assert len(measure.timed) == 1  # the stitched program, once
    assert "rms_norm" in measure.timed[0] and "matmul" in measure.timed[0]
    assert f"{together * 1e6:.1f} us (7.0 us apart)" in log
    assert (found.sym_name.data == "whole_pick") == (not stitched)


def test_without_a_measure_the_stages_sum_decides(monkeypatch) -> None:
    _, found, log = _run(None, monkeypatch)
    assert "timed as one program" not in log
    assert found.sym_name.data != "whole_pick"  # 7 µs apart against 10


def test_stages_keep_their_part_of_the_share_when_the_whole_search_overran(
    monkeypatch,
) -> None:
    """The whole segment's search given 6 of a 10 s share takes 20 (its input
    slow to time): each of the two stages still gets its 2 s, not the least
    budget a search takes."""
    import time

    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    fn = _normed_projection()
    budgets: list[float] = []

    def search(self, f, budget, progress, prologue=None, served_by=None):
        budgets.append(budget)
        clock[0] += 20.0 if f is fn else budget
        seconds = 10e-6 if f is fn else 3e-6
        report = Report(f.sym_name.data, input_cost=seconds, best_cost=seconds)
        report.measured = [{"input": True, "chosen": True, "time_us": seconds * 1e6}]
        return Outcome(None, f.clone(), report)

    monkeypatch.setattr(_Segment, "_search", search)
    segment = _Segment(0, 1, Shares(110.0, (1.0,)), SearchOptions(), None, None)
    segment.run(fn, Progress(None), io.StringIO(), [])
    assert budgets == pytest.approx([6.0, 2.0, 2.0])


def test_each_search_is_served_from_the_cache_by_its_guaranteed_share(
    monkeypatch,
) -> None:
    """A segment whose earlier segments came from the cache starts with all
    the budget left (20 s here, of a 10 s total): its searches are still
    answered by cached results that had the share the segment is guaranteed
    (6 s for the whole, 2 s a stage), not the longer one it got."""
    import time

    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    fn = _normed_projection()
    served: list[float | None] = []

    def search(self, f, budget, progress, prologue=None, served_by=None):
        served.append(served_by)
        seconds = 10e-6 if f is fn else 3e-6
        report = Report(f.sym_name.data, input_cost=seconds, best_cost=seconds)
        report.measured = [{"input": True, "chosen": True, "time_us": seconds * 1e6}]
        return Outcome(None, f.clone(), report)

    monkeypatch.setattr(_Segment, "_search", search)
    shares = Shares(120.0, (1.0,), 10.0)
    segment = _Segment(0, 1, shares, SearchOptions(), None, None)
    segment.run(fn, Progress(None), io.StringIO(), [])
    assert served == pytest.approx([6.0, 2.0, 2.0])
