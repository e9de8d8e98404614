"""The GPU scripts' CPU-side parts: case handling, reports, PyTorch baselines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import bench  # noqa: E402


def test_gpu_check_compile_only_runs_through_its_worker(tmp_path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "gpu_check.py"),
            "--compile-only",
            "--only",
            "two_kernels",
            "dynamic_shared",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 PASS, 0 FAIL, 2 compiled" in proc.stdout
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert [r["status"] for r in report["results"]] == ["COMPILED", "COMPILED"]
    assert (tmp_path / "gpu_check.md").read_text().startswith("| case |")
    assert not list(tmp_path.glob("*.jsonl"))


def test_device_run_script_parses() -> None:
    subprocess.run(["bash", "-n", str(ROOT / "tools" / "device_run.sh")], check=True)


def test_mlir_file_naming(tmp_path) -> None:
    (tmp_path / "gqa.mlir").write_text("")
    (tmp_path / "lora_b8.mlir").write_text("")
    assert bench.mlir_file(tmp_path, "gqa", 1) == tmp_path / "gqa.mlir"
    assert bench.mlir_file(tmp_path, "gqa", 8) is None
    assert bench.mlir_file(tmp_path, "lora", 8) == tmp_path / "lora_b8.mlir"


def _config() -> bench.Config:
    c = bench.Config("gqa", 1, min_bytes=3_000_000)
    c.methods = [
        bench.Method("plain", "ours", "ok", 10.0, 9.5, 11.0),
        bench.Method("gqa_flashdecoding", "ours", "ok", 5.0, 4.8, 5.5),
        bench.Method("eager", "torch", "ok", 40.0, 39.0, 42.0),
        bench.Method("sdpa_flash_attention", "torch", "ok", 12.0, 11.0, 13.0),
        bench.Method("sdpa_math", "torch", "error", note="no kernel"),
        bench.Method("compile", "torch", "skipped", note="time budget spent"),
    ]
    return c


def test_markdown_reports_best_of_each_side() -> None:
    table = bench.markdown([_config()], copy_tbps=3.0)
    row = table.splitlines()[2]
    cells = [x.strip() for x in row.strip("|").split("|")]
    assert cells[:4] == ["gqa", "1", "5.0 [4.8–5.5]", "gqa_flashdecoding"]
    assert cells[4] == "40.0" and cells[5] == "skipped" and cells[6] == "—"
    assert cells[7] == "12.0 (flash_attention)"
    assert cells[8] == "12.0 (sdpa_flash_attention)"
    assert cells[9] == "2.40×"
    assert cells[10] == "0.60" and cells[11] == "20%" and cells[12] == "1.0"


def test_markdown_names_failed_candidates() -> None:
    c = bench.Config("lora", 8, min_bytes=1000)
    c.methods = [
        bench.Method("plain", "ours", "wrong"),
        bench.Method("eager", "torch", "ok", 8.0, 7.0, 9.0),
    ]
    assert "plain: wrong" in bench.markdown([c], copy_tbps=3.0)
    assert "| lora | 8 | ours/plain | wrong |" in bench.details([c], 3.0)
    assert "| torch/eager | ok | 8.0 | 7.0 | 9.0 | 0.00 (0%) |" in bench.details(
        [c], 3.0
    )


def test_plot_writes_or_explains(tmp_path) -> None:
    message = bench.plot([_config()], tmp_path / "bench.png")
    if "skipped" in message:
        assert "matplotlib" in message
    else:
        assert (tmp_path / "bench.png").stat().st_size > 0


@pytest.mark.parametrize(
    "name",
    ["gqa", "qknorm_gqa", "rmsnorm_linear", "lora", "gated_mlp", "norm_transformer"],
)
def test_torch_baselines_compute_the_workloads(name: str) -> None:
    torch = pytest.importorskip("torch")
    import baselines

    from mirage_xdsl.runtime.check import compare
    from mirage_xdsl.workloads import WORKLOADS, random_inputs

    module = WORKLOADS[name].module(2, 8)
    xs = random_inputs(module, 5, -0.25, 0.25)
    refs = WORKLOADS[name].reference(*xs)
    ts = [torch.from_numpy(x.astype(np.float32)) for x in xs]
    assert compare([o.numpy() for o in baselines.EAGER[name](*ts)], refs, 1e-4).ok
    sdpa = baselines.sdpa_variant(name, baselines.sdpa_backends()["math"])
    if name.endswith("gqa"):
        outs = sdpa(*baselines.sdpa_inputs(ts))
        assert compare([o.numpy() for o in outs], refs, 1e-4).ok
    else:
        assert sdpa is None


def test_bench_measured_rank_correlation() -> None:
    import bench_measured

    assert bench_measured.spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert bench_measured.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    assert np.isnan(bench_measured.spearman([1], [2]))


def test_markdown_reports_the_batched_figures() -> None:
    c = _config()
    c.methods[0].batched_us = 6.0
    c.methods[1].batched_us = 4.0
    c.methods[3].batched_us = 8.0
    cells = [
        x.strip()
        for x in bench.markdown([c], 3.0).splitlines()[2].strip("|").split("|")
    ]
    assert cells[13:] == [
        "4.0 (gqa_flashdecoding)",
        "8.0 (sdpa_flash_attention)",
        "2.00×",
    ]
