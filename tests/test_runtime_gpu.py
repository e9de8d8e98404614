"""The runtime on a real GPU (skipped, with the reason, where there is none)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from mirage_xdsl.runtime import CompiledProgram, GpuError
from mirage_xdsl.runtime.check import (
    INPUT_AMPLITUDE,
    compare,
    run_poisoned,
)
from mirage_xdsl.runtime.driver import gpu_unavailable_reason
from mirage_xdsl.runtime.selftest import SELFTESTS

REASON = gpu_unavailable_reason()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(REASON is not None, reason=f"{REASON}"),
]


def _inputs(program, seed):
    rng = np.random.default_rng(seed)
    out = []
    for spec in program.inputs():
        x = rng.uniform(-1, 1, spec.shape).astype(np.float32)
        if spec.dtype == "f16":
            x = x.astype(np.float16)
        elif spec.dtype == "bf16":
            ml_dtypes = pytest.importorskip("ml_dtypes")
            x = x.astype(ml_dtypes.bfloat16)
        out.append(x)
    return out


def _has_torch_cuda() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


@pytest.mark.parametrize("use_torch", [False, True], ids=["numpy", "torch"])
@pytest.mark.parametrize("name", sorted(SELFTESTS))
def test_selftest(name: str, use_torch: bool) -> None:
    if use_torch and not _has_torch_cuda():
        pytest.skip("torch with CUDA is not installed")
    test = SELFTESTS[name]
    with CompiledProgram(test.program) as compiled:
        for seed in (0, 1):
            xs = _inputs(test.program, seed)
            outs = run_poisoned(compiled, xs, use_torch)
            refs = test.reference(*[np.asarray(x, np.float32) for x in xs])
            result = compare(outs, refs, tolerance=1e-3)
            assert result.ok, result.summary()


def test_torch_outputs_and_cuda_graph_capture() -> None:
    if not _has_torch_cuda():
        pytest.skip("torch with CUDA is not installed")
    import torch

    test = SELFTESTS["two_kernels_with_intermediate"]
    compiled = CompiledProgram(test.program)
    a, b = (torch.rand(s.shape, device="cuda").half() for s in compiled.inputs())
    out = compiled(a, b)
    assert out.dtype == torch.float16 and out.device.type == "cuda"
    torch.testing.assert_close(
        out.float(), (a.float() * b.float() + a.float()), rtol=2e-3, atol=2e-3
    )

    static_out = torch.full_like(out, float("nan"))
    compiled(a, b, outputs=[static_out])  # warm up outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        compiled(a, b, outputs=[static_out])
    a.copy_(torch.rand_like(a))
    static_out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(
        static_out.float(), a.float() * b.float() + a.float(), rtol=2e-3, atol=2e-3
    )


def test_wrong_torch_dtype_is_rejected() -> None:
    if not _has_torch_cuda():
        pytest.skip("torch with CUDA is not installed")
    import torch

    compiled = CompiledProgram(SELFTESTS["two_kernels_with_intermediate"].program)
    a = torch.zeros(compiled.inputs()[0].shape, device="cuda")
    with pytest.raises(Exception, match="expected dtype float16, got torch.float32"):
        compiled(a, a)


FAULT = textwrap.dedent(
    """
    from mirage_xdsl.lowering.program import BufferSpec, GpuProgram, KernelLaunch
    from mirage_xdsl.runtime import CompiledProgram
    import numpy as np
    src = 'extern "C" __global__ void oob(float* x) { x[(size_t)1 << 40] = 1.0f; }'
    p = GpuProgram("oob", src, (BufferSpec("x", (4,), "f32", "output", 0),),
                   (KernelLaunch("oob", (1, 1, 1), (1, 1, 1), 0, ("x",)),))
    CompiledProgram(p).run()
    """
)


def test_kernel_fault_is_reported_by_name() -> None:
    # A fault spoils the context for the rest of the process: run it apart.
    # -P: the source tree's mirage_xdsl/ must not shadow the installed package
    proc = subprocess.run(
        [sys.executable, "-P", "-c", FAULT], capture_output=True, text=True
    )
    assert proc.returncode != 0
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in proc.stderr, proc.stderr[-2000:]


def test_too_much_shared_memory_is_rejected_before_launch() -> None:
    from dataclasses import replace

    program = SELFTESTS["dynamic_shared_64k"].program
    launch = replace(program.launches[0], shared_bytes=300 * 1024)
    with pytest.raises(GpuError, match="dynamic shared memory"):
        CompiledProgram(replace(program, launches=(launch,))).load()


@pytest.mark.skipif(
    importlib.util.find_spec("mirage_xdsl.lowering.cuda") is None,
    reason="the CUDA code generator is not installed",
)
@pytest.mark.parametrize(
    "name",
    ["gqa", "rmsnorm_linear", "lora", "gated_mlp", "norm_transformer", "qknorm_gqa"],
)
def test_small_workloads_match_interpreter(name: str) -> None:
    from mirage_xdsl.runtime import compile
    from mirage_xdsl.semantics.interpreter import run
    from mirage_xdsl.workloads import WORKLOADS, random_inputs

    module = WORKLOADS[name].module(1, 8)
    a = INPUT_AMPLITUDE
    xs = random_inputs(module, 3, -a, a)
    with compile(module) as compiled:
        result = compare(run_poisoned(compiled, xs, use_torch=False), run(module, xs))
    assert result.ok, result.summary()


def test_measured_selection_compiles_ahead_and_picks_a_correct_program(
    tmp_path, monkeypatch
) -> None:
    """The search's selection on this GPU: every candidate compiled before the
    first is timed, and the fastest, run on its backend, matches the reference."""
    pytest.importorskip("torch")
    from mirage_xdsl.runtime import compile, measure
    from mirage_xdsl.runtime.cache import default_cache
    from mirage_xdsl.search.options import SearchOptions
    from mirage_xdsl.search.superoptimizer import superoptimize_function
    from mirage_xdsl.semantics.interpreter import entry_function, run
    from mirage_xdsl.workloads import WORKLOADS, random_inputs

    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path))
    module = WORKLOADS["rmsnorm_linear"].module(1, 8)
    gpu = measure.GpuMeasure()
    misses_after_prepare = []
    prepare = gpu.prepare

    def recorded(modules):
        prepare(modules)
        misses_after_prepare.append(default_cache().misses)

    gpu.prepare = recorded
    outcome = superoptimize_function(
        entry_function(module),
        SearchOptions(budget=60, verify_top=2),
        measure=gpu,
        cache_dir="none",
    )
    report = outcome.report
    assert len(report.measured) >= 2 and misses_after_prepare
    assert default_cache().misses == misses_after_prepare[0]  # nothing compiled late
    chosen = next(m for m in report.measured if m.get("chosen"))
    assert chosen["time_us"] == min(m["time_us"] for m in report.measured)
    from xdsl.dialects.builtin import ModuleOp

    found = ModuleOp([outcome.function])
    a = INPUT_AMPLITUDE
    xs = random_inputs(module, 5, -a, a)
    with compile(found, backend=chosen["backend"]) as compiled:
        result = compare(run_poisoned(compiled, xs, use_torch=False), run(module, xs))
    assert result.ok, result.summary()


def test_the_copy_bandwidth_is_a_kernels_not_a_copy_engines() -> None:
    """The floors' bandwidth is that of a copy kernel in a graph: at least
    what a plain ``copy_`` of the same 1 GiB moves outside a graph (on an H100
    a graph-captured ``copy_`` of that size is a copy-engine memcpy, about 20%
    slower, and made every floor that much too lenient)."""
    torch = pytest.importorskip("torch")
    from mirage_xdsl.runtime.bandwidth import COPY_BYTES, copy_bandwidth

    src = torch.empty(COPY_BYTES // 2, dtype=torch.float16, device="cuda")
    dst = torch.empty_like(src)
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    seconds = []
    for _ in range(5):
        start.record()
        dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        seconds.append(start.elapsed_time(end) * 1e-3)
    eager = 2 * COPY_BYTES / float(np.median(seconds))
    assert copy_bandwidth() >= 0.95 * eager
