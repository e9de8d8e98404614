"""tools/bench_projections.py without a GPU: what it would run (its dry run),
the programs it builds, and its report."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

import bench_projections as bp  # noqa: E402


def test_cases_cover_every_projection_and_row_wise_program() -> None:
    cases = bp.cases(bp.parse_args([]))
    projections = [c for c in cases if c.kind == "projection"]
    rowwise = [c for c in cases if c.kind == "rowwise"]
    assert len(projections) == len(bp.PROJECTIONS) * 3
    assert len(rowwise) == len(bp.ROWWISE) * len(bp.WIDTHS) * 3
    down = next(c for c in projections if c.name == "8192x2048" and c.rows == 1)
    assert down.floor_bytes == 2 * (8192 + 8192 * 2048 + 2048)
    only = bp.cases(bp.parse_args(["--only", "rowwise", "--rows", "1"]))
    assert {c.kind for c in only} == {"rowwise"} and {c.rows for c in only} == {1}


@pytest.mark.parametrize("name", sorted(bp.ROWWISE))
def test_row_wise_programs_capture(name: str) -> None:
    case = next(c for c in bp.cases(bp.parse_args(["--only", name, "--rows", "8"])))
    module = bp.module_of(case)
    assert any(op.name.startswith("kernel.") for op in module.walk())


def test_dry_run_builds_the_default_kernels(capsys) -> None:
    # nn.Linear's [N, K] weight at one row: 1-column strips, unsplit; a [K, N] one:
    # 64-column strips, split 8 ways, then the combine
    assert bp.main(["--dry-run", "--only", "8192x2048", "--rows", "1"]) == 0
    assert "8192x2048 rows 1: 1 kernels [[2048, 1, 1]]" in capsys.readouterr().out
    argv = ["--dry-run", "--only", "8192x2048", "--rows", "1", "--weights", "kn"]
    assert bp.main(argv) == 0
    assert (
        "8192x2048 rows 1: 2 kernels [[32, 8, 1], [4, 1, 1]]" in capsys.readouterr().out
    )


def test_report_gives_each_method_its_share_of_the_floor() -> None:
    case = bp.Case("8192x2048", "projection", 1, [[1, 8192], [8192, 2048]], 3_000_000)
    case.us = {"default": 2.0, "torch": 4.0}
    case.status = {"search": "skipped (budget)", "torch.compile": "wrong (rel L2 1e-1)"}
    case.default_kernels = [{"kernel": "k0", "grid": [32, 8, 1], "threads": 128}]
    table = bp.markdown([case], 3e12)
    row = table.splitlines()[-1]
    assert "| 1.0 |" in row  # floor: 3 MB at 3 TB/s
    assert "2.0 (50%)" in row and "4.0 (25%)" in row
    assert "skipped (budget)" in row and "wrong (rel L2 1e-1)" in row
    assert "32x8x1·128t" in row


class _Timer:
    """Stands in for GraphTimer: runs each call once and says 2 µs."""

    def per_call_us(self, calls, count: int) -> float:
        for call in calls:
            call()
        return 2.0


def test_methods_are_checked_before_they_are_timed() -> None:
    """On the CPU with a stand-in timer: torch's own method passes the check
    and gets its time; a method computing something else is reported wrong
    and not timed; one that raises is an error of one line; and with the
    budget spent, the rest is skipped."""
    args = bp.parse_args(["--only", "l2norm", "--rows", "8"])
    bench = bp.Bench(args, timer=_Timer(), device="cpu")
    case = bp.cases(args)[0]
    bench.time_method(case, "torch", bench.torch_method(case, None))
    assert case.status["torch"] == "ok" and case.us["torch"] == 2.0
    bench.time_method(case, "default", lambda: lambda xs: xs[0])
    assert case.status["default"].startswith("wrong") and "default" not in case.us

    def broken():
        raise ValueError("no kernel\nsecond line")

    bench.time_method(case, "search", broken)
    assert case.status["search"] == "error: no kernel"
    bench.deadline = 0.0
    bench.time_method(case, "torch.compile", bench.torch_method(case, "default"))
    assert case.status["torch.compile"] == "skipped (budget)"


def test_normed_projections_read_one_norm_and_check_against_torch() -> None:
    """The normed group: its cases and bytes, its default build (the norm
    computed in the split kernels: two kernels at one row), and torch's
    method passing the check on the CPU (the first product compared)."""
    args = bp.parse_args(["--only", "normed", "--rows", "1"])
    cases = bp.cases(args)
    assert [c.name for c in cases] == [
        "norm+2048x3072",
        "norm+2048x8192+8192",
        "norm+4096x6144",
        "norm+4096x14336+14336",
    ]
    gate_up = cases[1]
    assert gate_up.shapes == [[1, 2048], [2048], [8192, 2048], [8192, 2048]]
    assert gate_up.floor_bytes == 2 * (2048 + 2048 + 2 * 2048 * 8192 + 2 * 8192)
    module = bp.module_of(cases[0])
    assert [op.name for op in module.walk() if op.name.startswith("kernel.")] == [
        "kernel.rms_norm",
        "kernel.mul",
        "kernel.transpose",
        "kernel.matmul",
    ]
    bench = bp.Bench(args, timer=_Timer(), device="cpu")
    bench.time_method(gate_up, "torch", bench.torch_method(gate_up, None))
    assert gate_up.status["torch"] == "ok"
    bench.time_method(gate_up, "default", lambda: lambda xs: xs[0] @ xs[2].t())
    assert gate_up.status["default"].startswith("wrong")
