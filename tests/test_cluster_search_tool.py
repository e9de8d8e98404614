"""tools/cluster_search.py: bad arguments, the comparison of two runs, and
(slow) the whole tool on a tiny budget, a two-process pool and a two-worker
Dask cluster."""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import cluster_search  # noqa: E402

ARGS = Namespace(budget=6.0, seed=0, jobs=2, workers=2, threads=1, measure=False)


def _row(run: str, program: str, cost: float) -> dict:
    segment = {
        "segment": "f_s0",
        "kernels": "2 → 1",
        "cost_us": [5.4, cost],
        "chosen_us": None,
        "stopped": "budget",
    }
    return {
        "run": run,
        "search_s": 6.5,
        "kernels_before": 2,
        "kernels_after": 1,
        "cost_us": [5.4, cost],
        "tasks_made": 10,
        "segments": [segment],
        "program": program,
    }


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--workers", "0"], "--workers"),
        (["--budget", "-1"], "--budget"),
        (["--jobs", "0"], "--jobs"),
    ],
)
def test_a_bad_argument_is_one_line_naming_it(argv, named, capsys) -> None:
    assert cluster_search.main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and named in err


def test_programs_that_differ_are_not_the_same_pick() -> None:
    rows = {"pool": _row("pool", "a", 3.0), "dask": _row("dask", "b", 3.5)}
    result = cluster_search.compare(rows)
    assert result["same_pick"] is False
    table = cluster_search.markdown(result, ARGS)
    assert "Same µGraph picked by both runs: no." in table
    assert "| f_s0 | 2 → 1 | 5.4 → 3.0 |" in table
    assert "5.4 → 3.5" in table


def test_a_failed_run_leaves_the_pick_unknown() -> None:
    rows = {
        "pool": _row("pool", "a", 3.0),
        "dask": {"run": "dask", "error": "ImportError: no distributed"},
    }
    result = cluster_search.compare(rows)
    assert result["same_pick"] is None
    table = cluster_search.markdown(result, ARGS)
    assert "| dask | ImportError: no distributed |" in table
    assert "unknown (a run failed)" in table


@pytest.mark.slow
def test_both_runs_on_a_tiny_budget(tmp_path, capsys) -> None:
    pytest.importorskip("distributed")
    out = tmp_path / "cluster.json"
    argv = ["--budget", "6", "--jobs", "2", "--workers", "2", "--threads", "1"]
    assert cluster_search.main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    pool, dask = result["runs"]["pool"], result["runs"]["dask"]
    for run in (pool, dask):
        assert run["search_s"] > 0 and run["tasks_made"] > 0
        assert 0 < run["kernels_after"] <= run["kernels_before"]
        assert 0 < run["cost_us"][1] <= run["cost_us"][0]
        assert run["segments"] and run["program"].startswith("builtin.module")
    assert pool["kernels_before"] == dask["kernels_before"]
    assert dask["tasks_on_workers"] > 0 and 1 <= dask["workers_used"] <= 2
    assert "tasks_on_workers" not in pool
    assert result["same_pick"] == (pool["program"] == dask["program"])
    assert "| dask |" in capsys.readouterr().out
