"""Fitting the cost model's numbers to measured times."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mirage_xdsl.search.calibration import (
    Sample,
    fit,
    log_error,
    rank_correlation,
    spearman,
)
from mirage_xdsl.search.cost_model import H100, cost
from mirage_xdsl.search.ugraph import from_function
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS


def graphs():
    """The plain programs and hand-written µGraphs at two batches: kernels of
    every kind, bandwidth-, latency- and launch-bound."""
    out = [
        from_function(entry_function(w.module(b, 4)))
        for w in WORKLOADS.values()
        for b in (1, 8)
    ]
    out += [
        from_function(entry_function(build(b, 4)))
        for _, build in HANDWRITTEN.values()
        for b in (1, 8)
    ]
    return out


def test_spearman() -> None:
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)


@pytest.mark.slow
def test_fit_recovers_the_numbers_that_made_the_timings() -> None:
    """Timings made by a target with slower launches, less per-SM bandwidth
    and longer load latency: the fit from the datasheet target finds
    estimates that match them far better than it started."""
    truth = replace(
        H100,
        launch_seconds=H100.launch_seconds * 2.5,
        sm_dram_bandwidth=H100.sm_dram_bandwidth / 3,
        load_latency_seconds=H100.load_latency_seconds * 2,
    )
    samples = [Sample(g, cost(g, truth)) for g in graphs()]
    before = log_error(H100, samples)
    fitted = fit(samples, H100)
    assert log_error(fitted, samples) < before / 20
    assert rank_correlation(fitted, samples) > 0.99
    assert fitted.launch_seconds == pytest.approx(truth.launch_seconds, rel=0.3)


def test_fit_stays_within_span_and_names_checked() -> None:
    g = graphs()[0]
    fitted = fit([Sample(g, cost(g, H100) * 1000)], H100, names=("launch_seconds",))
    assert fitted.launch_seconds <= H100.launch_seconds * 8.0001
    with pytest.raises(ValueError, match="not numbers"):
        fit([Sample(g, 1.0)], H100, names=("warp_size",))
