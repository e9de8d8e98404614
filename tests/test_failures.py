"""A candidate that fails to build or to run is kept in the search's report
with a one-line reason, not dropped without a trace."""

from __future__ import annotations

import numpy as np

from mirage_xdsl.search.budget import Stop
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.ranking import pick
from mirage_xdsl.search.report import Candidate, Report
from mirage_xdsl.search.screening import screen
from mirage_xdsl.search.ugraph import KernelOp, UGraph


def _graph(kind: str) -> UGraph:
    return UGraph("f", "f32", ((4, 4),), (KernelOp(kind, (0,)),), (1,))


def test_a_candidate_that_fails_to_run_is_screened_out_with_its_reason() -> None:
    x = np.ones((4, 4), dtype=np.float32)
    assert screen(_graph("exp"), [x], [np.exp(x)]) == (True, "")
    assert screen(_graph("exp"), [x], [x]) == (False, "")  # ran, wrong values
    passed, reason = screen(_graph("no_such_op"), [x], [x])
    assert not passed
    assert reason.startswith("screening a 1-kernel candidate: ")
    assert "\n" not in reason


class _FailingBackend:
    """A measure whose one backend cannot build anything but the input."""

    key = "fake"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, module) -> float:
        self.calls += 1
        return 1.0 if self.calls == 1 else float("inf")

    def describe(self) -> dict:
        if self.calls == 1:
            return {"backend": "fake", "time_us": 1.0}
        return {
            "backend": None,
            "time_us": None,
            "failures": ["fake build: MirageError: no room"],
        }


def test_a_candidate_the_device_cannot_time_is_reported(monkeypatch) -> None:
    from mirage_xdsl.search import ranking

    monkeypatch.setattr(ranking, "verified", lambda p, ranked, *_: ranked)
    monkeypatch.setattr(ranking, "verifying", lambda p, ranked, *_: (c for c in ranked))
    monkeypatch.setattr(ranking, "default_builds", lambda *_: [])
    report = Report("f", input_cost=2.0)
    found = [Candidate(1.0, _graph("exp"), True)]
    cost, graph = pick(
        None,
        _graph("exp"),
        2.0,
        found,
        SearchOptions(),
        _FailingBackend(),
        Stop(),
        report,
    )
    assert cost == 2.0  # the input, the only one timed
    assert report.failures == [
        "timing candidate 1 (1 kernels): fake build: MirageError: no room"
    ]
    assert "failures" not in report.measured[1]
    report.failures.append("screening a 1-kernel candidate: KeyError: 'x'")
    # each failure counted where it happened: screening, or timing
    assert "passed screening (1 failed)" in report.summary()
    assert ", 1 timed (1 failed);" in report.summary()
    assert report.to_json()["failures"] == report.failures


def test_a_plain_callable_measure_is_summarised_without_a_backend(monkeypatch) -> None:
    """A measure without ``describe`` (any callable returning seconds) names
    no backend; the report's line still gives its figures."""
    from mirage_xdsl.search import ranking

    monkeypatch.setattr(ranking, "verified", lambda p, ranked, *_: ranked)
    monkeypatch.setattr(ranking, "verifying", lambda p, ranked, *_: (c for c in ranked))
    monkeypatch.setattr(ranking, "default_builds", lambda *_: [])
    report = Report("f", input_cost=2.0)
    times = iter([3e-6, 1e-6])
    found = [Candidate(1.0, _graph("exp"), True)]
    pick(
        None,
        _graph("exp"),
        2.0,
        found,
        SearchOptions(),
        lambda module: next(times),
        Stop(),
        report,
    )
    assert "; measured 1.0 us, input 3.0 us, 2 timed" in report.summary()
