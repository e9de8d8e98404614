"""Choosing matmul forms on the whole program, without a GPU: a stand-in
tuner and program timer."""

from __future__ import annotations

import pytest

from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.lowering.triton import generate_triton
from mirage_xdsl.runtime import program_forms
from mirage_xdsl.runtime.triton_compile import KernelConfig, TritonBinary
from mirage_xdsl.workloads import WORKLOADS


@pytest.fixture
def program():
    """A one-row split-K projection: a partial kernel with three forms and the
    kernel summing its partial products."""
    g = new_kernel_graph("proj")
    g.mark_output(g.matmul(g.new_input((1, 2048)), g.new_input((2048, 3072))))
    return generate_triton(g.module())


def _chosen(kernels, variant_of) -> program_forms.Chosen:
    return {
        k.name: (
            KernelConfig(variant_of(k), 4, 3),
            TritonBinary(variant_of(k), b"\x7fELF", 4, 0, ()),
        )
        for k in kernels
    }


def _tuned(program):
    """The partial kernel tuned to its last form, as a per-kernel tuner may."""
    return _chosen(program.kernels, lambda k: k.variants[-1])


def test_dot_form_kept_where_the_program_runs_faster_so(
    program, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path / "cuda"))
    partial, combine = program.kernels
    assert len(partial.variants) == 3 and len(combine.variants) == 1
    tuned_kernels: list[list[str]] = []

    def tune(kernels):
        tuned_kernels.append([k.name for k in kernels])
        assert all(len(k.variants) == 1 for k in kernels)  # the tl.dot form only
        assert all(k.text.endswith(program_forms.DOT_ONLY) for k in kernels)
        return _chosen(kernels, lambda k: k.variants[0])

    times = {partial.variants[-1]: 11.9, partial.name: 8.6}

    def time_program(chosen):
        return times[chosen[partial.name][0].variant]

    logged: list[str] = []
    chosen = program_forms.pick_forms(
        program, _tuned(program), "GPU", tune, time_program, logged.append
    )
    assert chosen[partial.name][0].variant == partial.name
    assert chosen[combine.name][0].variant == combine.name
    assert tuned_kernels == [[partial.name]] and "keeping tl.dot" in logged[0]

    # the verdict is cached: the next build times nothing
    def no_timing(chosen):
        raise AssertionError("timed again")

    again = program_forms.pick_forms(program, _tuned(program), "GPU", tune, no_timing)
    assert again[partial.name][0].variant == partial.name


def test_tuned_forms_kept_where_they_run_faster(program, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path / "cuda"))
    partial = program.kernels[0]

    def tune(kernels):
        return _chosen(kernels, lambda k: k.variants[0])

    def time_program(chosen):
        return 9.0 if chosen[partial.name][0].variant == partial.name else 8.0

    chosen = program_forms.pick_forms(
        program, _tuned(program), "GPU", tune, time_program
    )
    assert chosen[partial.name][0].variant == partial.variants[-1]


def test_nothing_to_choose_times_nothing(program) -> None:
    """All kernels in tl.dot form, or a program of one kernel: no timing."""

    def never(*_):
        raise AssertionError("called")

    dots = _chosen(program.kernels, lambda k: k.variants[0])
    assert program_forms.pick_forms(program, dots, "GPU", never, never) is dots
    one = generate_triton(WORKLOADS["rmsnorm_linear"].module(1, 16))
    assert len(one.kernels) == 1
    tuned = _chosen(one.kernels, lambda k: k.variants[-1])
    assert program_forms.pick_forms(one, tuned, "GPU", never, never) is tuned
