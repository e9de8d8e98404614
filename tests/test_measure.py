"""Timing candidates on the GPU (runtime/measure.py), without a GPU: the
compiler, the inputs and the timer are stand-ins."""

from __future__ import annotations

import pytest

from mirage_xdsl.runtime import api, measure
from mirage_xdsl.runtime.driver import GpuError
from mirage_xdsl.runtime.timer import Sample, Unreliable


class FakeCompiled:
    def __init__(self, backend: str):
        self.backend = backend
        self.closed = False

    def run(self, *inputs, outputs=None):
        if self.backend == "cuda":
            raise GpuError(
                "kernel 'k0' needs 239616 B shared memory; the GPU allows 232448 B"
            )

    def close(self):
        self.closed = True


class FakeTimer:
    def __init__(self) -> None:
        self.last = None
        self.retried: list[str] = []

    def per_call_us(self, calls, count):
        for call in calls:
            call()
        self.last = Sample(5.0, 4.5, 6.0) if count > 1 else Sample(10.0, 9, 11)
        return self.last.median


class WaitingTimer(FakeTimer):
    """The batched figure waited for another process once."""

    def per_call_us(self, calls, count):
        waited = ["other processes are computing on the GPU (pid 9)"]
        self.retried = waited if count > 1 else []
        return super().per_call_us(calls, count)


def test_a_build_the_gpu_refuses_is_left_out_not_raised(monkeypatch) -> None:
    built: list[FakeCompiled] = []

    def fake_compile(module, backend):
        built.append(FakeCompiled(backend))
        return built[-1]

    monkeypatch.setattr(api, "compile", fake_compile)
    monkeypatch.setattr(measure, "random_tensors", lambda compiled: ([], []))
    failures: list[str] = []
    timings = measure.time_module(
        object(), ("triton", "cuda"), FakeTimer(), failures=failures
    )
    assert timings == [measure.Timing("triton", 10.0, 5.0, (4.5, 6.0))]
    assert all(c.closed for c in built)  # the refused build is released too
    # ... and why it was left out is kept
    assert failures == [
        "cuda run: GpuError: kernel 'k0' needs 239616 B shared memory; "
        "the GPU allows 232448 B"
    ]


def test_a_backend_that_cannot_build_is_reported_by_the_measure(monkeypatch) -> None:
    def fake_compile(module, backend):
        if backend == "cuda":
            raise ValueError("no CUDA C form for op 'x'\nmore detail")
        return FakeCompiled(backend)

    monkeypatch.setattr(api, "compile", fake_compile)
    monkeypatch.setattr(measure, "random_tensors", lambda compiled: ([], []))
    gpu = measure.GpuMeasure(backends=measure.BACKENDS, _timer=FakeTimer())
    assert gpu(object()) == pytest.approx(5.0e-6)
    described = gpu.describe()
    assert described["backend"] == "triton"
    assert described["spread_us"] == (4.5, 6.0)  # of the figure that decides
    assert described["failures"] == [
        "cuda build: ValueError: no CUDA C form for op 'x'"
    ]


def test_a_program_lowered_ahead_is_what_the_cuda_backend_compiles(
    monkeypatch,
) -> None:
    given: list[tuple[object, str]] = []

    class Ok:
        def run(self, *xs, outputs):
            pass

        def close(self):
            pass

    def fake_compile(program, backend):
        given.append((program, backend))
        return Ok()

    monkeypatch.setattr(api, "compile", fake_compile)
    monkeypatch.setattr(measure, "random_tensors", lambda compiled: ([], []))
    module, lowered = object(), object()
    measure.time_module(module, ("triton", "cuda"), FakeTimer(), lowered)
    assert given == [(module, "triton"), (lowered, "cuda")]


class BusyTimer:
    """A timer on a GPU that another process keeps busy."""

    def __init__(self) -> None:
        self.asked = 0

    def per_call_us(self, calls, count):
        self.asked += 1
        raise Unreliable("GPU GPU-1: no reliable timing in 3 attempts: busy")


def test_a_gpu_it_cannot_trust_hands_the_choice_to_the_cost_model(
    monkeypatch,
) -> None:
    monkeypatch.setattr(api, "compile", lambda program, backend: FakeCompiled(backend))
    monkeypatch.setattr(measure, "random_tensors", lambda compiled: ([], []))
    monkeypatch.setattr(measure, "precompile", lambda modules, backends: [None] * 2)
    timer = BusyTimer()
    gpu = measure.GpuMeasure(backends=("triton",), _timer=timer)
    first, second = object(), object()
    gpu.prepare([first, second])
    with pytest.warns(UserWarning, match="busy; the cost model chooses instead"):
        assert gpu(first) == float("inf")
    assert gpu.fallback.endswith("busy")
    assert gpu.describe()["unmeasured"] == gpu.fallback
    assert gpu(second) == float("inf") and timer.asked == 1  # not timed again
    gpu.prepare([first, second])  # the next selection tries the GPU again
    assert gpu.fallback == ""


def test_the_autotuner_finding_the_gpu_busy_is_no_build_failure(monkeypatch) -> None:
    def tuning(program, backend):
        raise Unreliable("GPU GPU-1: no reliable timing in 3 attempts: busy")

    monkeypatch.setattr(api, "compile", tuning)
    failures: list[str] = []
    with pytest.raises(Unreliable):
        measure.time_module(object(), ("triton",), FakeTimer(), failures=failures)
    assert failures == []


class FlakyGpu:
    """A measure whose GPU is taken over after it timed the input."""

    key = "gpu:fake"

    def __init__(self) -> None:
        self.fallback = ""
        self.timed = 0

    def prepare(self, modules) -> None:
        self.fallback = ""

    def __call__(self, module) -> float:
        if self.fallback:
            return float("inf")
        self.timed += 1
        if self.timed == 1:
            return 1e-9  # the input, timed before the GPU was taken
        self.fallback = "GPU GPU-1: no reliable timing in 3 attempts: busy"
        return float("inf")


def test_a_selection_the_gpu_failed_is_the_cost_models_and_not_cached(
    tmp_path,
) -> None:
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.ir.printing import module_text
    from mirage_xdsl.search.options import SearchOptions
    from mirage_xdsl.search.superoptimizer import superoptimize_function
    from mirage_xdsl.semantics.interpreter import entry_function
    from mirage_xdsl.workloads import WORKLOADS

    fn = entry_function(WORKLOADS["gated_mlp"].module(1, 8))
    options = SearchOptions(jobs=1, max_kernels=1)
    gpu = FlakyGpu()
    flaky = superoptimize_function(fn, options, gpu, str(tmp_path))
    modelled = superoptimize_function(fn, options, None, "none")

    def text(outcome) -> str:
        return module_text(ModuleOp([outcome.function.clone()]))

    assert gpu.timed == 2  # the input, then the first candidate
    assert text(flaky) == text(modelled)  # not the input its figure favoured
    assert flaky.report.stopped == "GPU unreliable, the cost model chose"
    assert f"measured selection: {gpu.fallback}" in flaky.report.failures
    assert not list(tmp_path.glob("*.json"))  # next time the GPU is asked again


def test_a_timing_that_waited_for_another_process_says_so(monkeypatch) -> None:
    monkeypatch.setattr(api, "compile", lambda program, backend: FakeCompiled(backend))
    monkeypatch.setattr(measure, "random_tensors", lambda compiled: ([], []))
    gpu = measure.GpuMeasure(backends=("triton",), _timer=WaitingTimer())
    assert gpu(object()) == pytest.approx(5.0e-6)
    assert gpu.describe()["retried"] == [
        "other processes are computing on the GPU (pid 9)"
    ]
    plain = measure.GpuMeasure(backends=("triton",), _timer=FakeTimer())
    plain(object())
    assert "retried" not in plain.describe()


def test_by_default_the_measure_times_the_backend_programs_run_with(monkeypatch):
    from mirage_xdsl.runtime import api

    monkeypatch.setattr(api, "triton_installed", lambda: True)
    assert measure.GpuMeasure().backends == ("triton",)
    monkeypatch.setattr(api, "triton_installed", lambda: False)
    assert measure.GpuMeasure().backends == ("cuda",)


def test_candidates_are_built_with_their_forms_tried_towards_tl_dot_only(
    monkeypatch,
) -> None:
    """Measured selection times a candidate as built with only its kernels not
    in tl.dot form tried in it (``program_forms.towards_dot_only``); a program
    built outside it is tried both ways."""
    from mirage_xdsl.runtime import program_forms

    seen: list[bool] = []

    def fake_compile(module, backend):
        seen.append(program_forms._TOWARDS_DOT_ONLY.get())
        return FakeCompiled(backend)

    monkeypatch.setattr(api, "compile", fake_compile)
    monkeypatch.setattr(measure, "random_tensors", lambda compiled: ([], []))
    gpu = measure.GpuMeasure(backends=("triton",), _timer=FakeTimer())
    assert gpu(object()) == pytest.approx(5.0e-6)
    assert seen == [True] and not program_forms._TOWARDS_DOT_ONLY.get()


def test_a_candidate_is_built_with_loops_unrolled_in_part(monkeypatch) -> None:
    """GpuMeasure builds what it times as measured selection times candidates
    (``triton_loops.rolled_loops``, ``program_forms.towards_dot_only``), and
    a program compiled outside it is built unrolled in full."""
    from mirage_xdsl.lowering.triton_loops import loop_range
    from mirage_xdsl.runtime import program_forms

    seen: list[tuple[str, bool]] = []

    def fake_compile(module, backend):
        seen.append((loop_range(64, True), program_forms._TOWARDS_DOT_ONLY.get()))
        return FakeCompiled(backend)

    monkeypatch.setattr(api, "compile", fake_compile)
    monkeypatch.setattr(measure, "random_tensors", lambda compiled: ([], []))
    gpu = measure.GpuMeasure(backends=("triton",), _timer=FakeTimer())
    assert gpu(object()) == pytest.approx(5e-6)
    assert seen == [("tl.range(0, 64, loop_unroll_factor=8)", True)]
    assert loop_range(64, True) == "tl.static_range(0, 64)"
