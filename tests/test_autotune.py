"""The Triton autotuner's bookkeeping, without a GPU: its space, the cached
choices and the in-memory record of compiled kernels."""

from __future__ import annotations

import pytest

from mirage_xdsl.lowering.triton import generate_triton
from mirage_xdsl.runtime import autotune
from mirage_xdsl.runtime.triton_compile import KernelConfig, TritonBinary
from mirage_xdsl.workloads import WORKLOADS


@pytest.fixture
def program():
    return generate_triton(WORKLOADS["rmsnorm_linear"].module(1, 16))


def _binary(name: str) -> TritonBinary:
    return TritonBinary(name, b"\x7fELF", 4, 0, ())


def test_space_has_stages_only_where_a_loop_pipelines_a_dot(program) -> None:
    """rmsnorm_linear (dims / 16): at 16 rows, the norm kernel (no loop) gets
    one stage; at one row (one kernel: the norm is computed in the matmul's),
    the matmul's tensor-core form every stage, its multiply-and-sum forms (no
    tl.dot to pipeline; summed per iteration, or after the loop) the one stage
    its loop runs without a GPU."""
    norm = generate_triton(WORKLOADS["rmsnorm_linear"].module(16, 16)).kernels[0]
    (matmul,) = program.kernels
    assert {c.num_stages for c in autotune.space(norm)} == {1}
    assert matmul.forloop > 1 and matmul.dot_variants == (matmul.name,)
    by_form = {
        v: {c.num_stages for c in autotune.space(matmul) if c.variant == v}
        for v in matmul.variants
    }
    assert by_form == {
        matmul.name: set(autotune.STAGES),
        f"{matmul.name}_fma": {3},
        f"{matmul.name}_defer": {3},
    }


def test_tuning_chooses_warps_then_stages_where_a_dot_is_pipelined(
    program, tmp_path, monkeypatch
) -> None:
    """Each form at each warp count first, at the default stages; then the
    fastest's other stages where it is the tensor-core form over a loop:
    what is timed is a part of the whole space, and the choice the fastest
    of it."""
    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "_compile_one", lambda job: _binary(job[2].key()))
    monkeypatch.setattr(autotune, "usable_cpus", lambda: 1)
    monkeypatch.setattr(autotune, "_binaries", autotune.OrderedDict())
    (matmul,) = program.kernels
    dot = next(c for c in autotune.first_round(matmul) if c.variant == matmul.name)
    fastest = autotune.KernelConfig(dot.variant, dot.num_warps, 5)

    def timer(kernel, binary):  # the dot form at these warps, 5 stages, wins
        timed.append(binary.name)
        config = next(c for c in autotune.space(matmul) if c.key() == binary.name)
        warps_off = config.variant != dot.variant or config.num_warps != dot.num_warps
        return 10.0 * warps_off + abs(config.num_stages - 5) + 1.0

    timed: list[str] = []
    chosen = autotune.tune("src", [matmul], "GPU", timer)
    first = [c.key() for c in autotune.first_round(matmul)]
    second = [c.key() for c in autotune.second_round(matmul, dot)]
    assert timed == first + second
    assert set(timed) < {c.key() for c in autotune.space(matmul)}
    assert chosen[matmul.name][0] == fastest
    # a form without tl.dot has no second round
    fma = next(c for c in autotune.first_round(matmul) if c.variant != matmul.name)
    assert autotune.second_round(matmul, fma) == []


@pytest.mark.parametrize(
    "tile, warps", [(64, (1, 2, 4)), (256, (1, 2, 4, 8)), (4096, autotune.WARPS)]
)
def test_warps_are_those_the_largest_tile_keeps_busy(program, tile, warps) -> None:
    from dataclasses import replace

    kernel = replace(program.kernels[0], largest_tile=tile)
    assert autotune.warps_for(kernel) == warps
    assert {c.num_warps for c in autotune.space(kernel)} == set(warps)


def test_pending_is_the_cached_choice_else_the_first_round(
    program, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path))
    kernels = list(program.kernels)
    first, *rest = kernels
    whole = autotune.pending(kernels, "GPU")
    assert len(whole) == sum(len(autotune.first_round(k)) for k in kernels)
    choice = autotune.space(first)[-1]
    autotune.store_choice(first, "GPU", choice, {})
    after = autotune.pending(kernels, "GPU")
    assert [c for k, c in after if k is first] == [choice]
    assert len(after) == 1 + sum(len(autotune.first_round(k)) for k in rest)
    # another GPU has no choice yet
    assert len(autotune.pending(kernels, "other GPU")) == len(whole)


def test_a_kernel_compiled_ahead_is_not_compiled_again(monkeypatch) -> None:
    compiled: list[KernelConfig] = []

    def fake_compile(job):
        source, signature, config = job
        compiled.append(config)
        if config.num_warps == 3:
            return "CompilationError: no"
        return _binary(f"k_w{config.num_warps}")

    monkeypatch.setattr(autotune, "_compile_one", fake_compile)
    monkeypatch.setattr(autotune, "usable_cpus", lambda: 1)
    monkeypatch.setattr(autotune, "_binaries", autotune.OrderedDict())
    sig = ("*fp16",)
    first = autotune.compile_all(
        "src a", [(sig, KernelConfig("k", w, 2)) for w in (2, 3, 4)]
    )
    assert [b.name if isinstance(b, TritonBinary) else b[:16] for b in first] == [
        "k_w2",
        "CompilationError",
        "k_w4",
    ]
    assert len(compiled) == 3
    # tuning the same module later compiles only what it has not seen, and a
    # setting that failed is tried again
    again = autotune.compile_all(
        "src a", [(sig, KernelConfig("k", w, 2)) for w in (2, 3, 4, 8)]
    )
    assert [c.num_warps for c in compiled[3:]] == [3, 8]
    assert again[0] is first[0] and again[2] is first[2]
    # another module's kernel of the same name and settings is its own, and
    # one asked for twice at once is compiled once
    twice = autotune.compile_all("src b", [(sig, KernelConfig("k", 2, 2))] * 2)
    assert len(compiled) == 6 and twice[0] is twice[1]


def test_the_record_keeps_only_the_most_recent(monkeypatch) -> None:
    monkeypatch.setattr(autotune, "_compile_one", lambda job: _binary("k"))
    monkeypatch.setattr(autotune, "usable_cpus", lambda: 1)
    monkeypatch.setattr(autotune, "_binaries", autotune.OrderedDict())
    monkeypatch.setattr(autotune, "REMEMBERED", 3)
    for i in range(5):
        autotune.compile_all(f"src {i}", [(("*fp16",), KernelConfig("k"))])
    assert len(autotune._binaries) == 3


def test_past_the_search_deadline_a_kernel_gets_its_default_settings_unkept(
    program, tmp_path, monkeypatch
) -> None:
    """Timing a candidate past its search's deadline compiles only the
    heuristic setting of each kernel with no cached choice (and its fewer
    stages), times those, and keeps no choice: the program the search picks
    is tuned in full when it is built."""
    import time

    from mirage_xdsl.search.budget import timing_until

    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "_compile_one", lambda job: _binary(job[2].key()))
    monkeypatch.setattr(autotune, "usable_cpus", lambda: 1)
    monkeypatch.setattr(autotune, "_binaries", autotune.OrderedDict())
    (kernel,) = program.kernels
    default = autotune.heuristic(kernel)
    timed: list[str] = []

    def timer(k, binary):
        timed.append(binary.name)
        return float(len(timed))

    with timing_until(time.monotonic() - 1):
        late = autotune.pending([kernel], "GPU", late=True)
        chosen = autotune.tune("src", [kernel], "GPU", timer)
    assert [c for _, c in late] == [default, *autotune.fallbacks(default)]
    assert timed == [c.key() for _, c in late]
    assert chosen[kernel.name][0] == default  # the first timed, the fastest
    assert autotune.cached_choice(kernel, "GPU") is None
    # within the deadline both rounds are timed and the choice kept
    timed.clear()
    with timing_until(time.monotonic() + 60):
        autotune.tune("src", [kernel], "GPU", timer)
    first = autotune.first_round(kernel)
    assert timed[: len(first)] == [c.key() for c in first]
    assert autotune.cached_choice(kernel, "GPU") is not None


def test_heuristic_warps_follow_the_largest_tile(program) -> None:
    """One warp for a tile a warp holds at two elements a thread (a combine of
    a few parts per row), 8 past LARGE_TILE, 4 between."""
    from dataclasses import replace

    (kernel,) = program.kernels

    def warps(tile: int) -> int:
        return autotune.heuristic(replace(kernel, largest_tile=tile)).num_warps

    assert [warps(t) for t in (1, 64, 65, 4096, 8192, 8193)] == [1, 1, 4, 4, 4, 8]


SLOW = "_dot"
"""A stand-in compile of a setting whose form ends so takes this long (s)."""


def _slow_compile(job) -> TritonBinary:
    """A stand-in for ``_compile_one`` (module level, so forked compilers can
    unpickle it): the tl.dot form (no suffix) takes seconds, the others not."""
    import time

    config = job[2]
    if not config.variant.endswith(("_fma", "_defer")):
        time.sleep(30)
    return _binary(config.key())


def test_compiling_stops_at_the_deadline_and_late_settings_are_marked(
    program, monkeypatch
) -> None:
    """In parallel compilers, the settings not compiled by the deadline are
    LATE and their compilers stopped (the call returns at the deadline, not
    when the slow compile would have ended)."""
    import time

    monkeypatch.setattr(autotune, "_compile_one", _slow_compile)
    monkeypatch.setattr(autotune, "usable_cpus", lambda: 16)
    monkeypatch.setattr(autotune, "_binaries", autotune.OrderedDict())
    (kernel,) = program.kernels
    jobs = [(kernel.signature, c) for c in autotune.first_round(kernel)]
    began = time.monotonic()
    out = autotune.compile_all("src", jobs, until=began + 3.0)
    assert time.monotonic() - began < 15
    for (_, config), binary in zip(jobs, out, strict=True):
        if config.variant == kernel.name:
            assert binary == autotune.LATE
        else:
            assert isinstance(binary, TritonBinary)
    # a late setting is not remembered as compiled
    assert all(isinstance(b, TritonBinary) for b in autotune._binaries.values())


@pytest.mark.slow
def test_a_kernel_not_compiled_by_the_deadline_gets_the_heuristic_unkept(
    program, tmp_path, monkeypatch
) -> None:
    """Tuning that starts before the deadline and whose compiles run past it
    times what compiled by then (the heuristic's setting, compiled first,
    among them; here no tl.dot form), starts no second round and keeps no
    choice; a kernel none of whose settings compiled in time gets the
    heuristic's setting, compiled then."""
    import time
    from dataclasses import replace

    from mirage_xdsl.search.budget import timing_until

    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "_compile_one", _slow_compile)
    monkeypatch.setattr(autotune, "usable_cpus", lambda: 4)
    monkeypatch.setattr(autotune, "_binaries", autotune.OrderedDict())
    (kernel,) = program.kernels
    timed: list[str] = []

    def timer(k, binary):
        timed.append(binary.name)
        return float(len(timed))

    began = time.monotonic()
    with timing_until(began + 3.0):
        chosen = autotune.tune("src", [kernel], "GPU", timer)
    assert time.monotonic() - began < 15
    assert {KernelConfig.key(c) for c in autotune.first_round(kernel)} > set(timed)
    assert all(not t.startswith(f"{kernel.name}:") for t in timed)  # no tl.dot
    # four compilers: the heuristic's setting first, then four tl.dot forms
    # hold them all past the deadline
    assert chosen[kernel.name][0] == autotune.heuristic(kernel)
    assert autotune.cached_choice(kernel, "GPU") is None
    # a kernel with only its tl.dot form: nothing compiles in time, so the
    # heuristic's setting (the tl.dot form) is compiled in the time given
    # past the deadline (2 s of LATE_COMPILE_SECONDS)
    only_dot = replace(
        kernel, name="only_dot", variants=(kernel.name,), text=kernel.text + "#"
    )
    monkeypatch.setattr(autotune, "_binaries", autotune.OrderedDict())
    monkeypatch.setattr(autotune, "_compile_one", _slow_compile_briefly)
    with timing_until(time.monotonic() + 0.5):
        chosen = autotune.tune("src2", [only_dot], "GPU", timer)
    assert chosen["only_dot"][0] == autotune.heuristic(only_dot)


def test_a_candidate_whose_kernel_compiles_too_late_fails_its_build(
    program, tmp_path, monkeypatch
) -> None:
    """A kernel with nothing compiled by LATE_COMPILE_SECONDS past the
    deadline fails the candidate's build (which the search leaves untimed),
    whether tuning began before the deadline or past it, and the call
    returns then, not when the compile would have ended."""
    import time
    from dataclasses import replace

    from mirage_xdsl.search.budget import timing_until

    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "_compile_one", _slow_compile)
    monkeypatch.setattr(autotune, "usable_cpus", lambda: 4)
    monkeypatch.setattr(autotune, "_binaries", autotune.OrderedDict())
    monkeypatch.setattr(autotune, "LATE_COMPILE_SECONDS", 1.0)
    (kernel,) = program.kernels
    only_dot = replace(
        kernel, name="only_dot", variants=(kernel.name,), text=kernel.text + "#"
    )
    for deadline in (0.5, -1.0):  # tuning begins before it, then past it
        began = time.monotonic()
        with (
            timing_until(began + deadline),
            pytest.raises(RuntimeError, match="by the search's deadline"),
        ):
            autotune.tune("src", [only_dot], "GPU", lambda k, b: 1.0)
        assert time.monotonic() - began < 10


@pytest.mark.slow
def test_with_no_deadline_tuning_waits_for_a_slow_compile(
    program, tmp_path, monkeypatch
) -> None:
    """The input, the default builds and the program built to run are tuned
    with no deadline: a kernel whose only form takes seconds to compile gets
    it, past LATE_COMPILE_SECONDS."""
    from dataclasses import replace

    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "_compile_one", _slow_compile_briefly)
    monkeypatch.setattr(autotune, "usable_cpus", lambda: 16)  # all at once
    monkeypatch.setattr(autotune, "_binaries", autotune.OrderedDict())
    monkeypatch.setattr(autotune, "LATE_COMPILE_SECONDS", 1.0)
    (kernel,) = program.kernels
    only_dot = replace(
        kernel, name="only_dot", variants=(kernel.name,), text=kernel.text + "#"
    )
    chosen = autotune.tune("src", [only_dot], "GPU", lambda k, b: 1.0)
    assert chosen["only_dot"][0].variant == kernel.name


def _slow_compile_briefly(job) -> TritonBinary:
    """As :func:`_slow_compile`, the slow form taking 2 s."""
    import time

    config = job[2]
    if not config.variant.endswith(("_fma", "_defer")):
        time.sleep(2)
    return _binary(config.key())


def test_within_a_compile_limit_a_kernel_with_nothing_compiled_is_left_out(
    program, tmp_path, monkeypatch
) -> None:
    """``compiling_within``: a kernel none of whose settings compiles in the
    time given is left out of the choice, with no setting compiled for it
    after (its compilers stopped), and the others are chosen as usual."""
    import time
    from dataclasses import replace

    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "_compile_one", _slow_compile)
    monkeypatch.setattr(autotune, "usable_cpus", lambda: 16)
    monkeypatch.setattr(autotune, "_binaries", autotune.OrderedDict())
    (kernel,) = program.kernels
    only_dot = replace(
        kernel, name="only_dot", variants=(kernel.name,), text=kernel.text + "#"
    )
    fma = replace(
        kernel,
        name="fma",
        variants=(f"{kernel.name}_fma",),
        dot_variants=(),
        text=kernel.text + "##",
    )
    began = time.monotonic()
    with autotune.compiling_within(1.0):
        chosen = autotune.tune("src", [only_dot, fma], "GPU", lambda k, b: 1.0)
    assert time.monotonic() - began < 10
    assert set(chosen) == {"fma"}
    assert autotune.cached_choice(only_dot, "GPU") is None
    # past a search's deadline too, the limit is the one given, not the
    # time a candidate's kernels get past the deadline
    from mirage_xdsl.search.budget import timing_until

    monkeypatch.setattr(autotune, "LATE_COMPILE_SECONDS", 20.0)
    monkeypatch.setattr(autotune, "_binaries", autotune.OrderedDict())
    began = time.monotonic()
    with timing_until(began - 1), autotune.compiling_within(1.0):
        chosen = autotune.tune("src", [only_dot, fma], "GPU", lambda k, b: 1.0)
    assert time.monotonic() - began < 10
    assert set(chosen) == {"fma"}


def _projection(name: str, n: int = 3072):
    from mirage_xdsl.ir.builder import new_kernel_graph

    g = new_kernel_graph(name)
    g.mark_output(g.matmul(g.new_input((1, 2048)), g.new_input((2048, n))))
    return generate_triton(g.module())


def test_the_same_kernel_in_another_program_shares_its_tuning(
    tmp_path, monkeypatch
) -> None:
    """A kernel's choice is keyed without its name: the same kernel in a
    program of another name (a segment and its stages, a pick and the layer
    it is stitched into) is not tuned again, and gets the choice in its own
    form's name; a kernel of other shapes is tuned."""
    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "_compile_one", lambda job: _binary(job[2].key()))
    monkeypatch.setattr(autotune, "usable_cpus", lambda: 1)
    monkeypatch.setattr(autotune, "_binaries", autotune.OrderedDict())
    a, b, other = _projection("a"), _projection("b"), _projection("a", 4096)
    ka, kb, ko = a.kernels[0], b.kernels[0], other.kernels[0]
    assert ka.name != kb.name and len(ka.variants) > 1
    timed: list[str] = []

    def timer(k, binary):  # the last form at these warps wins
        timed.append(binary.name)
        return 1.0 if binary.name.startswith(ka.variants[-1] + ":") else 2.0

    chosen = autotune.tune(a.source, [ka], "GPU", timer)[ka.name][0]
    assert chosen.variant == ka.variants[-1] and timed
    assert autotune.tune_key(ka, "GPU") == autotune.tune_key(kb, "GPU")
    assert autotune.pending([kb], "GPU") == [
        (kb, KernelConfig(kb.variants[-1], chosen.num_warps, chosen.num_stages))
    ]
    assert autotune.tune_key(ko, "GPU") != autotune.tune_key(ka, "GPU")
    assert autotune.cached_choice(ko, "GPU") is None
