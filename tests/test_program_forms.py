"""Choosing matmul forms on the whole program, without a GPU: a stand-in
tuner and program timer."""

from __future__ import annotations

from dataclasses import replace

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


def _to_dot(kernels) -> program_forms.Chosen:
    """A stand-in tuner that puts every kernel in its tl.dot form."""
    return _chosen(kernels, lambda k: k.variants[0])


def _tuned_form_faster(partial):
    """A stand-in program timer: the program is faster with ``partial`` in
    any form but tl.dot."""

    def time_program(chosen):
        return 9.0 if chosen[partial.name][0].variant == partial.name else 8.0

    return time_program


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
    assert tuned_kernels == [[partial.name]] and f"moving {partial.name}" in logged[0]

    # the verdict is cached: the next build times nothing
    def no_timing(chosen):
        raise AssertionError("timed again")

    again = program_forms.pick_forms(program, _tuned(program), "GPU", tune, no_timing)
    assert again[partial.name][0].variant == partial.name


def test_other_forms_taken_where_the_tuned_dot_form_runs_slower(
    program, tmp_path, monkeypatch
) -> None:
    """The other way: the tuner chose ``tl.dot``, the program runs faster with
    the kernel's other forms (tuned among themselves)."""
    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path / "cuda"))
    partial = program.kernels[0]
    dots = _chosen(program.kernels, lambda k: k.variants[0])

    def tune(kernels):
        assert [k.name for k in kernels] == [partial.name]
        assert kernels[0].variants == partial.variants[1:]
        assert kernels[0].text.endswith(program_forms.OTHERS_ONLY)
        return _chosen(kernels, lambda k: k.variants[-1])

    def time_program(chosen):
        return 40.5 if chosen[partial.name][0].variant == partial.name else 32.4

    chosen = program_forms.pick_forms(program, dots, "GPU", tune, time_program)
    assert chosen[partial.name][0].variant == partial.variants[-1]
    moved = program_forms.cached_verdict(program_forms.verdict_key(program, "GPU"))
    assert moved == [partial.name]


def test_each_kernel_moves_only_where_the_program_gains(tmp_path, monkeypatch) -> None:
    """Kernels are tried one by one: a move that slows the program is undone,
    and the next is tried on the best choice so far."""
    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path / "cuda"))
    g = new_kernel_graph("two")
    x = g.new_input((1, 2048))
    g.mark_output(
        g.matmul(g.matmul(x, g.new_input((2048, 2048))), g.new_input((2048, 3072)))
    )
    program = generate_triton(g.module())
    kernels = program_forms.movable(program)
    assert len(kernels) == 2
    first, second = kernels
    dots = _chosen(program.kernels, lambda k: k.variants[0])

    def tune(ks):
        return _chosen(ks, lambda k: k.variants[-1])

    def time_program(chosen):
        moved = {n for n, (c, _) in chosen.items() if "_" in c.variant.removeprefix(n)}
        return {frozenset(): 10.0, frozenset({first.name}): 12.0}.get(
            frozenset(moved), 9.0 if second.name in moved else 99.0
        )

    chosen = program_forms.pick_forms(program, dots, "GPU", tune, time_program)
    assert chosen[first.name][0].variant == first.variants[0]
    assert chosen[second.name][0].variant == second.variants[-1]


def test_past_the_deadline_only_tl_dot_is_tried(program, tmp_path, monkeypatch) -> None:
    """A candidate timed past its search's deadline: a kernel in tl.dot form
    keeps it, one in another form is tried in tl.dot; no verdict is kept."""
    from mirage_xdsl.search.budget import timing_until

    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path / "cuda"))
    partial = program.kernels[0]

    def never(*_):
        raise AssertionError("called")

    dots = _chosen(program.kernels, lambda k: k.variants[0])
    with timing_until(0.0):
        assert program_forms.pick_forms(program, dots, "GPU", never, never) is dots

    def time_program(chosen):
        return 8.0 if chosen[partial.name][0].variant == partial.name else 9.0

    with timing_until(0.0):
        chosen = program_forms.pick_forms(
            program, _tuned(program), "GPU", _to_dot, time_program
        )
    assert chosen[partial.name][0].variant == partial.name
    key = program_forms.verdict_key(program, "GPU")
    assert program_forms.cached_verdict(key) is None


def test_tuned_forms_kept_where_they_run_faster(program, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path / "cuda"))
    partial = program.kernels[0]

    tune, time_program = _to_dot, _tuned_form_faster(partial)

    chosen = program_forms.pick_forms(
        program, _tuned(program), "GPU", tune, time_program
    )
    assert chosen[partial.name][0].variant == partial.variants[-1]


def test_nothing_to_choose_times_nothing(program) -> None:
    """Every kernel of one form, or a program of one kernel: no timing."""

    def never(*_):
        raise AssertionError("called")

    partial, combine = program.kernels
    fixed = replace(program, kernels=(program_forms.dot_only(partial), combine))
    dots = _chosen(fixed.kernels, lambda k: k.variants[0])
    assert program_forms.pick_forms(fixed, dots, "GPU", never, never) is dots
    one = generate_triton(WORKLOADS["rmsnorm_linear"].module(1, 16))
    assert len(one.kernels) == 1
    tuned = _chosen(one.kernels, lambda k: k.variants[-1])
    assert program_forms.pick_forms(one, tuned, "GPU", never, never) is tuned


def test_a_move_that_does_not_hold_up_is_dropped(
    program, tmp_path, monkeypatch
) -> None:
    """Timed once more, the moved program is no faster: the tuned forms stay."""
    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path / "cuda"))
    partial = program.kernels[0]

    def tune(kernels):
        return _chosen(kernels, lambda k: k.variants[0])

    times = iter([10.0, 9.0, 9.2, 9.6])  # tuned, moved; then each again

    def time_program(chosen):
        return next(times)

    logged: list[str] = []
    chosen = program_forms.pick_forms(
        program, _tuned(program), "GPU", tune, time_program, logged.append
    )
    assert chosen[partial.name][0].variant == partial.variants[-1]
    assert next(times, None) is None and "keeping the tuned forms" in logged[0]
    assert program_forms.cached_verdict(program_forms.verdict_key(program, "GPU")) == []


def test_a_kernel_whose_other_forms_do_not_compile_keeps_its_form(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path / "cuda"))
    g = new_kernel_graph("two")
    x = g.new_input((1, 2048))
    y = g.matmul(g.matmul(x, g.new_input((2048, 2048))), g.new_input((2048, 3072)))
    g.mark_output(y)
    program = generate_triton(g.module())
    first, second = program_forms.movable(program)
    dots = _chosen(program.kernels, lambda k: k.variants[0])

    def tune(ks):
        if any(k.name == first.name for k in ks):
            raise RuntimeError(f"no setting of kernel '{first.name}' compiled")
        return _chosen(ks, lambda k: k.variants[-1])

    def time_program(chosen):
        return 9.0 if chosen[second.name][0].variant != second.name else 10.0

    chosen = program_forms.pick_forms(program, dots, "GPU", tune, time_program)
    assert chosen[first.name][0].variant == first.variants[0]
    assert chosen[second.name][0].variant == second.variants[-1]


def test_towards_dot_only_leaves_tl_dot_kernels_alone(program, tmp_path, monkeypatch):
    """As measured selection times a candidate: a kernel the tuner put in
    tl.dot form is not tried in its other forms, one in another form is
    tried in tl.dot, and the verdict is kept apart from the both-ways one."""
    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path / "cuda"))
    partial = program.kernels[0]

    def never(*_):
        raise AssertionError("called")

    dots = _chosen(program.kernels, lambda k: k.variants[0])
    with program_forms.towards_dot_only():
        assert program_forms.pick_forms(program, dots, "GPU", never, never) is dots

    def time_program(chosen):
        return 8.0 if chosen[partial.name][0].variant == partial.name else 9.0

    with program_forms.towards_dot_only():
        chosen = program_forms.pick_forms(
            program, _tuned(program), "GPU", _to_dot, time_program
        )
    assert chosen[partial.name][0].variant == partial.name
    one_way = program_forms.verdict_key(program, "GPU", both_ways=False)
    assert program_forms.cached_verdict(one_way) == [partial.name]
    assert (
        program_forms.cached_verdict(program_forms.verdict_key(program, "GPU")) is None
    )


def test_past_the_deadline_a_form_is_tried_only_if_it_compiles_in_moments(
    program, tmp_path, monkeypatch
) -> None:
    """Past the deadline the tl.dot forms are tuned within
    ``LATE_COMPILE_SECONDS`` of compiling; a kernel the tuner leaves out (its
    form not compiled by then) keeps its own, and the program is not timed
    for it."""
    from mirage_xdsl.runtime import autotune
    from mirage_xdsl.search.budget import timing_until

    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path / "cuda"))
    partial = program.kernels[0]
    within: list[float] = []

    def too_slow(kernels):  # compiles nothing in time: leaves every kernel out
        within.append(autotune._COMPILE_WITHIN.get())
        return {}

    def never(*_):
        raise AssertionError("called")

    tuned = _tuned(program)
    with timing_until(0.0):
        chosen = program_forms.pick_forms(program, tuned, "GPU", too_slow, never)
    assert chosen == tuned and chosen[partial.name][0].variant != partial.name
    assert within == [autotune.LATE_COMPILE_SECONDS]
    # within the deadline the tuner is given all the time it needs
    within.clear()
    with timing_until(float("inf")):
        program_forms.pick_forms(program, tuned, "GPU", too_slow, never)
    assert within and all(w == float("inf") for w in within)
