"""The GPU scripts' CPU-side parts: case handling, reports, PyTorch baselines."""

from __future__ import annotations

import json
import os
import shutil
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


def _device_run(
    tmp_path: Path, *args: str, python: str = "", **env: str
) -> tuple[subprocess.CompletedProcess, Path]:
    """Run a copy of tools/device_run.sh in ``tmp_path/repo`` (the script works
    from the folder above its own), with a fake Python: a bash script whose
    body is ``python``, which logs each call to ``python.calls``."""
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "tools" / "device_run.sh", repo / "tools")
    fake = tmp_path / "python"
    fake.write_text(
        f'#!/usr/bin/env bash\necho "$*" >> {tmp_path / "python.calls"}\n{python}\n'
    )
    fake.chmod(0o755)
    out = tmp_path / "out"
    clean = {
        k: v for k, v in os.environ.items() if k not in ("BENCH_CACHE", "BENCH_BUDGET")
    }
    proc = subprocess.run(
        ["bash", str(repo / "tools" / "device_run.sh"), *args],
        env={**clean, "OUT": str(out), "PYTHON": str(fake), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc, out


def _python_calls(tmp_path: Path) -> list[str]:
    calls = tmp_path / "python.calls"
    return calls.read_text().splitlines() if calls.exists() else []


def test_device_run_refuses_an_unknown_stage(tmp_path) -> None:
    proc, out = _device_run(tmp_path, "frobnicate")
    line = (
        "device_run: unknown stage 'frobnicate' (install|test|check|search|bench|all)\n"
    )
    assert proc.returncode == 2 and proc.stdout == line
    assert (out / "device_run.log").read_text() == line
    assert _python_calls(tmp_path) == []


def test_device_run_install_needs_the_wheels(tmp_path) -> None:
    proc, _ = _device_run(tmp_path, "install")
    assert proc.returncode == 1, proc.stdout
    assert "device_run: no wheels in .device/wheels; build them first" in proc.stdout
    assert "=== device_run: install exit 1" in proc.stdout
    assert _python_calls(tmp_path) == []


@pytest.mark.parametrize("rc", [0, 3])
def test_device_run_check_passes_its_options_and_its_outcome(tmp_path, rc) -> None:
    proc, out = _device_run(
        tmp_path, "check", "--only", "two_kernels", python=f"exit {rc}"
    )
    assert _python_calls(tmp_path) == [
        f"tools/gpu_check.py --out {out} --only two_kernels"
    ]
    assert f"=== device_run: check exit {rc}\n" in proc.stdout
    assert proc.returncode == (0 if rc == 0 else 1)
    assert (out / "device_run.log").read_text() == proc.stdout


def test_device_run_search_and_bench_carry_the_cache_between_calls(tmp_path) -> None:
    """A first call's searches leave their cache in bench-cache.tar.gz; a
    second call on a fresh copy starts from it (BENCH_CACHE) and packs both."""
    import tarfile

    record = (
        'mkdir -p "$MIRAGE_CACHE_DIR/search"\n'
        'n=$(ls "$MIRAGE_CACHE_DIR/search" | wc -l)\n'
        'touch "$MIRAGE_CACHE_DIR/search/entry$((n + 1))"'
    )

    def packed(out: Path) -> set[str]:
        with tarfile.open(out / "bench-cache.tar.gz") as tar:
            return {Path(n).name for n in tar.getnames() if "entry" in n}

    first = tmp_path / "first"
    proc, out = _device_run(first, "search", "--batches", "1", python=record)
    assert proc.returncode == 0, proc.stdout
    cache = first / "repo" / ".bench-cache"
    assert _python_calls(first) == [
        f"tools/bench.py --out {out} --search-only --batches 1 "
        f"--search-cache {cache}/search"
    ]
    assert packed(out) == {"entry1"}

    second = tmp_path / "second"
    archive = str(out / "bench-cache.tar.gz")
    proc, out = _device_run(
        second, "bench", python=record, BENCH_CACHE=archive, BENCH_BUDGET="120"
    )
    assert proc.returncode == 0, proc.stdout
    cache = second / "repo" / ".bench-cache"
    assert _python_calls(second) == [
        f"tools/bench.py --out {out} --budget 120 --search-cache {cache}/search"
    ]
    assert packed(out) == {"entry1", "entry2"}


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


def test_plot_explains_without_matplotlib(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    message = bench.plot([_config()], tmp_path / "bench.png")
    assert message == "bench.png skipped: matplotlib is not installed"
    assert not (tmp_path / "bench.png").exists()


def test_plot_draws_each_form_that_ran(tmp_path, monkeypatch) -> None:
    """With a stand-in for matplotlib: one bar per series that has a timing
    (the skipped compile, the failed SDPA math and the absent max-autotune
    have none), the best of each kind, saved with the Agg backend."""
    import types

    drawn: dict = {"bars": {}, "backend": None, "saved": None}

    class Axes:
        def bar(self, xs, ys, width, label) -> None:
            drawn["bars"][label] = list(ys)

        def set_ylim(self, bottom) -> None:
            drawn["bottom"] = bottom

        def __getattr__(self, name):
            return lambda *args, **kwargs: None

    class Figure:
        def tight_layout(self) -> None:
            pass

        def savefig(self, path, dpi) -> None:
            drawn["saved"] = path
            Path(path).write_bytes(b"stand-in")

    matplotlib = types.ModuleType("matplotlib")
    pyplot = types.ModuleType("matplotlib.pyplot")
    matplotlib.use = lambda backend: drawn.update(backend=backend)
    pyplot.subplots = lambda figsize: (Figure(), Axes())
    matplotlib.pyplot = pyplot
    monkeypatch.setitem(sys.modules, "matplotlib", matplotlib)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)

    path = tmp_path / "bench.png"
    assert bench.plot([_config()], path) == f"wrote {path}"
    assert drawn["backend"] == "Agg" and drawn["saved"] == path
    assert drawn["bars"] == {
        "ours (the search's µGraph)": [4.0],
        "hand-written (best)": [3.0],
        "eager": [35.0],
        "SDPA (best)": [8.0],
    }
    assert drawn["bottom"] == 1.5  # half the lowest bar, on the log scale


def test_plot_writes_a_png(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    message = bench.plot([_config()], tmp_path / "bench.png")
    assert message == f"wrote {tmp_path / 'bench.png'}"
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


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
