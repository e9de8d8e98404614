"""tools/shared_gpu.py without a GPU: a child search writes what it timed
(a stand-in measure), and the comparison of searches alone and together
gives the verdicts the tool prints."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import shared_gpu  # noqa: E402


class FixedGpu:
    """Times each module by the inverse of its text's length: the input, the
    shortest text here, is slowest."""

    key = "gpu:fixed"

    def __call__(self, module) -> float:
        from mirage_xdsl.ir.printing import module_text

        return 1e-3 / len(module_text(module))


@pytest.mark.slow
def test_a_child_search_writes_its_timings(tmp_path) -> None:
    out = tmp_path / "child.json"
    args = SimpleNamespace(
        child=str(out), searches=2, budget=60.0, top=2, batch=1, scale=8
    )
    assert shared_gpu.child(args, ["gated_mlp"], FixedGpu) == 0
    found = json.loads(out.read_text())["workloads"]["gated_mlp"]
    assert found["input_us"] > found["pick_us"] > 0
    assert found["pick"] and found["nonpositive"] == [] and found["stopped"] == []
    assert len(found["times_us"]) >= 2
    assert found["spreads"] == [] and found["retried"] == []  # none given


def _run(input_us, pick_us, pick="p", stopped=(), retried=0):
    times = [t for t in (input_us, pick_us) if t is not None]
    return {
        "workloads": {
            "gqa": {
                "input_us": input_us,
                "pick_us": pick_us,
                "pick": pick,
                "times_us": times,
                "nonpositive": [t for t in times if t <= 0],
                "spreads": [[t * 0.9, t * 1.2] for t in times if t > 0],
                "retried": ["other processes are computing on the GPU"] * retried,
                "stopped": list(stopped),
            }
        }
    }


ARGS = SimpleNamespace(searches=2, budget=5.0, batch=1, tolerance=0.1)


def test_figures_within_the_tolerance_pass() -> None:
    alone = [_run(10.0, 5.0), _run(10.2, 5.0)]
    together = [_run(10.8, 5.3, retried=2), _run(9.6, 4.8)]
    rows = shared_gpu.compare(["gqa"], alone, together, 0.1)
    assert rows[0]["input_within"] and rows[0]["pick_within"]
    text, ok = shared_gpu.render(rows, ARGS)
    assert ok and "timings at or below zero: 0" in text
    assert "widest p90/p10 of a figure timed: 1.33" in text
    assert "figures timed again (GPU busy, or refused by the checks): 2" in text


def test_a_zero_a_drift_or_a_lost_search_fails() -> None:
    alone = [_run(10.0, 5.0), _run(10.0, 5.0)]
    zero = [_run(10.0, 0.0), _run(10.0, 5.0)]
    text, ok = shared_gpu.render(shared_gpu.compare(["gqa"], alone, zero, 0.1), ARGS)
    assert not ok and "timings at or below zero: 1" in text
    slow = [_run(12.0, 5.0), _run(10.0, 5.0)]
    rows = shared_gpu.compare(["gqa"], alone, slow, 0.1)
    assert rows[0]["input_within"] is False
    assert not shared_gpu.render(rows, ARGS)[1]
    lost = [{"workloads": {}}, _run(10.0, 5.0)]
    text, ok = shared_gpu.render(shared_gpu.compare(["gqa"], alone, lost, 0.1), ARGS)
    assert not ok and "did not finish in --timeout: 1" in text


def test_a_selection_the_cost_model_made_is_counted() -> None:
    alone = [_run(10.0, 5.0), _run(10.0, 5.0)]
    fell = [_run(10.0, None, stopped=["GPU unreliable, the cost model chose"])] * 2
    rows = shared_gpu.compare(["gqa"], alone, fell, 0.1)
    assert rows[0]["fallbacks"] == 2 and rows[0]["pick_within"] is None
    assert (
        "the cost model made (GPU not trusted): 2" in shared_gpu.render(rows, ARGS)[0]
    )
