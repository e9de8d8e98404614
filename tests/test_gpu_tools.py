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
        bench.Method("search/triton", "ours", "ok", 6.0, 5.8, 6.5, batched_us=4.0),
        bench.Method("plain/triton", "plain", "ok", 10.0, 9.5, 11.0, batched_us=9.0),
        bench.Method(
            "gqa_flashdecoding/triton",
            "handwritten",
            "ok",
            5.0,
            4.8,
            5.5,
            batched_us=3.0,
        ),
        bench.Method("eager", "torch", "ok", 40.0, 39.0, 42.0, batched_us=35.0),
        bench.Method(
            "sdpa_flash_attention", "torch", "ok", 12.0, 11.0, 13.0, batched_us=8.0
        ),
        bench.Method("sdpa_math", "torch", "error", note="no kernel"),
        bench.Method("compile", "torch", "skipped", note="time budget spent"),
    ]
    c.search = {"kernels_before": 5, "kernels_after": 2, "seconds": 41.0, "stopped": ""}
    return c


def _cells(table: str) -> list[str]:
    return [x.strip() for x in table.splitlines()[2].strip("|").split("|")]


def test_headline_is_the_search_against_the_best_pytorch() -> None:
    """The hand-written µGraph is faster here, but it has its own column and
    never makes the headline."""
    cells = _cells(bench.markdown([_config()], copy_tbps=3.0))
    assert cells[:5] == ["gqa", "1", "4.0", "8.0 (sdpa_flash_attention)", "**2.00×**"]
    assert cells[5:8] == ["6.0 [5.8–6.5]", "12.0 (sdpa_flash_attention)", "**2.00×**"]
    assert cells[8] == "25%"  # 3 MB in 4 µs = 0.75 TB/s of 3.0
    assert cells[9] == "5 → 2 kernels, triton; search 41 s"
    assert cells[10] == "3.0 (gqa_flashdecoding/triton)" and cells[11] == "9.0"
    assert bench.speedups([_config()]) == ([2.0], [2.0])
    assert bench.geomean([2.0, 8.0]) == pytest.approx(4.0)


def test_pytorch_table_lists_every_form() -> None:
    cells = _cells(bench.torch_table([_config()]))
    assert cells[2:4] == ["40.0", "35.0"]
    assert cells[4:6] == ["skipped", "skipped"]
    assert cells[8:10] == ["12.0 (flash_attention)", "8.0"]


def test_markdown_names_failed_candidates() -> None:
    c = bench.Config("lora", 8, min_bytes=1000)
    c.methods = [
        bench.Method("search/triton", "ours", "wrong"),
        bench.Method("eager", "torch", "ok", 8.0, 7.0, 9.0),
    ]
    assert "search/triton: wrong" in bench.markdown([c], copy_tbps=3.0)
    assert "| lora | 8 | ours/search/triton | wrong |" in bench.details([c], 3.0)
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


def test_bench_measured_report_and_files(tmp_path) -> None:
    import json

    import bench_measured

    rows = [
        {
            "workload": "lora",
            "batch": 1,
            "candidate": c,
            "kernels": 1,
            "cost_us": cost,
            "time_us": t,
            "backend": "triton",
            "chosen": t == 3.0,
        }
        for c, cost, t in (
            ("input", 9.0, 9.0),
            ("verified", 3.0, 3.0),
            ("lora_fused", 4.0, None),
        )
    ]
    table, summary = bench_measured.report(rows)
    assert "| lora | 1 | lora_fused | 1 | 4.0 | — |" in table
    assert "2 candidates timed" in summary and "1.00" in summary
    bench_measured.write(rows, str(tmp_path))
    saved = json.loads((tmp_path / "bench_measured.json").read_text())
    assert saved["rows"] == rows and saved["spearman"] == pytest.approx(1.0)


def test_size_sweep_variants_are_valid_and_change_one_kernel() -> None:
    import sweep_sizes

    from mirage_xdsl.ir.context import make_context
    from mirage_xdsl.ir.diagnostics import parse
    from mirage_xdsl.search.ugraph import from_function, to_module

    path = ROOT / "examples" / "rmsnorm_linear_splitk.mlir"
    module = parse(make_context(), path.read_text(), str(path))
    original = from_function(next(iter(module.ops)))
    found = sweep_sizes.variants(original, 12)
    assert 0 < len(found) <= 12
    assert len({cand for _, cand in found}) == len(found)
    for _, cand in found:
        to_module(cand)  # verifies
        changed = [
            k
            for k, (a, b) in enumerate(zip(cand.ops, original.ops, strict=True))
            if a != b
        ]
        assert len(changed) == 1
