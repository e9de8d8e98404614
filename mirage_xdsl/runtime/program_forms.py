"""The matmul forms of a Triton program, chosen on the program as it runs.

The autotuner times each kernel alone (``autotune.tune``), so it cannot see
how kernels overlap when they run one after another with programmatic
dependent launch: a kernel launched early holds SMs (and their shared
memory) while it waits for the one before it, and it reads what it can
before waiting. The faster form alone is not always the faster form in the
program, either way:

- on an H100 the split-K pair of a one-row projection (partial products,
  then a kernel summing them) ran 2048x3072 in 8.6 µs with the partial
  kernel in its ``tl.dot`` form and 11.9 µs in its multiply-and-sum form,
  although that form was the faster kernel alone (8.6 against 9.2 µs);
  without programmatic launch the two took the same time;
- the other way, a one-row gate projection split over ``K`` (partial
  products, then a kernel summing them beside the up projection) ran in
  40.5 µs as tuned, its first kernel in ``tl.dot`` form (16.3 µs alone),
  and in 29.6-29.8 µs with that kernel in its multiply-and-sum form (16.8
  µs alone): those blocks leave room for the second kernel's to load their
  weights beside them (``docs/bench/program_forms_h100.json``, program 34).

So for a program of several kernels, :func:`pick_forms` tunes each kernel
with more than one form in the other family too (``tl.dot``, its first
form, where the tuner chose another; the others where it chose ``tl.dot``),
then, kernel by kernel, times the whole program (as measured selection
times a program) with that kernel moved to its other family, and keeps
each move that makes the program faster; the moves stand if the program so
moved is faster again when both are timed once more (timings of the same
program differ by a few percent from one to the next). The verdict (the
kernels moved) is cached beside the tuner's choices, keyed by the program's
source and the GPU. Measured selection times its candidates with only the
kernels not in ``tl.dot`` form tried in it (:func:`towards_dot_only`), as
before, since trying both ways costs a candidate seconds more; a candidate
timed past its search's deadline, whose kernels get the heuristic's
settings, tries only the ``tl.dot`` forms that compile within
``autotune.LATE_COMPILE_SECONDS``, and keeps no verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import replace

from mirage_xdsl.lowering.triton import TritonKernel, TritonProgram
from mirage_xdsl.runtime import autotune
from mirage_xdsl.runtime.triton_compile import KernelConfig, TritonBinary
from mirage_xdsl.search.budget import past_timing_deadline

Chosen = dict[str, tuple[KernelConfig, TritonBinary]]

DOT_ONLY = "\n# the tl.dot form only\n"
"""Appended to a kernel's text to key its ``tl.dot``-only tuning apart."""

OTHERS_ONLY = "\n# the forms other than tl.dot only\n"
"""Appended to a kernel's text to key the tuning of its other forms apart."""


def movable(program: TritonProgram) -> list[TritonKernel]:
    """The kernels whose form may move, in a program of several kernels
    (alone, a kernel's tuning is the whole story): those with more than one."""
    if len(program.kernels) < 2:
        return []
    return [k for k in program.kernels if len(k.variants) > 1]


def restricted(
    kernel: TritonKernel, variants: tuple[str, ...], marker: str
) -> TritonKernel:
    """``kernel`` with only ``variants`` of its forms, tuned under a key of its
    own (its text with ``marker`` appended)."""
    return replace(
        kernel,
        variants=variants,
        dot_variants=tuple(v for v in kernel.dot_variants if v in variants),
        text=kernel.text + marker,
    )


def dot_only(kernel: TritonKernel) -> TritonKernel:
    """``kernel`` with its ``tl.dot`` form alone, tuned under a key of its own."""
    return restricted(kernel, kernel.variants[:1], DOT_ONLY)


def others_only(kernel: TritonKernel) -> TritonKernel:
    """``kernel`` with its forms other than ``tl.dot`` (all but its first),
    tuned under a key of its own."""
    return restricted(kernel, kernel.variants[1:], OTHERS_ONLY)


def other_family(kernel: TritonKernel, chosen: Chosen) -> TritonKernel:
    """``kernel`` restricted to the forms of the family its choice is not in."""
    in_dot = chosen[kernel.name][0].variant == kernel.variants[0]
    return others_only(kernel) if in_dot else dot_only(kernel)


def tuned_others(
    kernels: list[TritonKernel],
    chosen: Chosen,
    tune: Callable[[list[TritonKernel]], Chosen],
) -> Chosen:
    """Each kernel tuned in its :func:`other_family`, all at once; where one
    has no setting in that family that compiles (a form that needs more
    registers or shared memory than a block has), one by one, leaving out
    those that fail: such a kernel keeps its form."""
    try:
        return tune([other_family(k, chosen) for k in kernels])
    except RuntimeError:
        pass
    out: Chosen = {}
    for k in kernels:
        try:
            out.update(tune([other_family(k, chosen)]))
        except RuntimeError:
            continue
    return out


_TOWARDS_DOT_ONLY: ContextVar[bool] = ContextVar("towards_dot_only", default=False)


@contextmanager
def towards_dot_only() -> Iterator[None]:
    """Within this, :func:`pick_forms` only tries ``tl.dot`` where a kernel has
    another form: what measured selection asks of the candidates it times.
    Trying both ways, each move timed twice, took timing a candidate from
    3.0-3.7 s to 6.3-7.1 s for the gate and up programs of a decode layer on
    the H100's host, and from 2.4 to 11.4 s for its batch-8 attention as
    captured; the programs built to run are tried both ways."""
    token = _TOWARDS_DOT_ONLY.set(True)
    try:
        yield
    finally:
        _TOWARDS_DOT_ONLY.reset(token)


def verdict_key(program: TritonProgram, gpu: str, both_ways: bool = True) -> str:
    way = "per kernel" if both_ways else "towards tl.dot"
    return autotune.entry_key(program.source, gpu, "forms", way)


def cached_verdict(key: str) -> list[str] | None:
    """The kernels moved to their other family, if the program was timed so before."""
    data = autotune.read_entry(f"forms-{key}")
    moved = None if data is None else data.get("moved")
    if not isinstance(moved, list) or not all(isinstance(m, str) for m in moved):
        return None
    return moved


def store_verdict(key: str, moved: list[str], timings: dict[str, float]) -> None:
    autotune.write_entry(f"forms-{key}", {"moved": moved, "timings_us": timings})


def pick_forms(
    program: TritonProgram,
    chosen: Chosen,
    gpu: str,
    tune: Callable[[list[TritonKernel]], Chosen],
    time_program: Callable[[Chosen], float],
    log: Callable[[str], None] | None = None,
) -> Chosen:
    """``chosen``, with the kernels moved to their other family of forms
    where the whole program runs faster so (the module's docstring).
    ``tune`` tunes kernels (``autotune.tune``); ``time_program`` gives the µs
    of one call of the program built from a choice."""
    kernels = movable(program)
    if not kernels:
        return chosen
    late = past_timing_deadline()
    both_ways = not (late or _TOWARDS_DOT_ONLY.get())
    key = verdict_key(program, gpu, both_ways)
    verdict = cached_verdict(key)
    if not both_ways:
        kernels = [k for k in kernels if chosen[k.name][0].variant != k.variants[0]]
        if not kernels:
            return chosen
    if verdict is not None:
        kernels = [k for k in kernels if k.name in verdict]
        if not kernels:
            return chosen
    # late, a move is tried only where its form compiles in moments
    limit = (
        autotune.compiling_within(autotune.LATE_COMPILE_SECONDS)
        if late
        else nullcontext()
    )
    with limit:
        others = tuned_others(kernels, chosen, tune)
    kernels = [k for k in kernels if k.name in others]
    if not kernels:
        return chosen
    if verdict is not None:
        return {**chosen, **{k.name: others[k.name] for k in kernels}}
    best = dict(chosen)
    fastest = time_program(best)
    timings = {"tuned": fastest}
    moved: list[str] = []
    for k in kernels:
        trial = {**best, k.name: others[k.name]}
        timings[k.name] = time_program(trial)
        if timings[k.name] < fastest:
            best, fastest = trial, timings[k.name]
            moved.append(k.name)
    if moved:
        # timed once more, both: a move that does not hold up was noise
        timings["tuned again"] = time_program(chosen)
        timings["moved again"] = time_program(best)
        if timings["moved again"] >= timings["tuned again"]:
            best, moved = dict(chosen), []
    if not late:  # the heuristic's settings decide nothing for later
        store_verdict(key, moved, timings)
    if log is not None:
        tried = ", ".join(
            f"{timings[k.name]:.1f} with {k.name} in {others[k.name][0].variant}"
            for k in kernels
        )
        log(
            f"forms of {program.function}: {timings['tuned']:.1f} µs as tuned, "
            f"{tried}: "
            + (f"moving {', '.join(moved)}" if moved else "keeping the tuned forms")
        )
    return best
