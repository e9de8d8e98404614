"""The matmul forms of a Triton program, chosen on the program as it runs.

The autotuner times each kernel alone (``autotune.tune``), so it cannot see
how kernels overlap when they run one after another with programmatic
dependent launch. On an H100 the split-K pair of a one-row projection
(partial products, then a kernel summing them) ran 2048x3072 in 8.6 µs with
the partial kernel in its ``tl.dot`` form and 11.9 µs in its multiply-and-sum
form, although that form was the faster kernel alone (8.6 against 9.2 µs);
without programmatic launch the two took the same time.

So where the tuned choice puts a kernel of a program of several kernels in a
form other than ``tl.dot``, :func:`pick_forms` also tunes those kernels in
their ``tl.dot`` form only, times both whole programs (as measured selection
times a program) and keeps the faster. The verdict is cached beside the
tuner's choices, keyed by the program's source and the GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from mirage_xdsl.lowering.triton import TritonKernel, TritonProgram
from mirage_xdsl.runtime import autotune
from mirage_xdsl.runtime.triton_compile import KernelConfig, TritonBinary

Chosen = dict[str, tuple[KernelConfig, TritonBinary]]

DOT_ONLY = "\n# the tl.dot form only\n"
"""Appended to a kernel's text to key its ``tl.dot``-only tuning apart."""


def other_forms(program: TritonProgram, chosen: Chosen) -> list[TritonKernel]:
    """The kernels whose chosen form is not ``tl.dot`` (their first form), in a
    program of several kernels (alone, a kernel's tuning is the whole story)."""
    if len(program.kernels) < 2:
        return []
    return [k for k in program.kernels if chosen[k.name][0].variant != k.variants[0]]


def dot_only(kernel: TritonKernel) -> TritonKernel:
    """``kernel`` with its ``tl.dot`` form alone, tuned under a key of its own."""
    dots = tuple(v for v in kernel.dot_variants if v == kernel.variants[0])
    return replace(
        kernel,
        variants=kernel.variants[:1],
        dot_variants=dots,
        text=kernel.text + DOT_ONLY,
    )


def verdict_key(program: TritonProgram, gpu: str) -> str:
    return autotune.entry_key(program.source, gpu, "forms")


def cached_verdict(key: str) -> str | None:
    """``"tuned"`` or ``"dot"`` if the program was timed both ways before."""
    data = autotune.read_entry(f"forms-{key}")
    verdict = None if data is None else data.get("keep")
    return verdict if verdict in ("tuned", "dot") else None


def store_verdict(key: str, keep: str, timings: dict[str, float]) -> None:
    autotune.write_entry(f"forms-{key}", {"keep": keep, "timings_us": timings})


def pick_forms(
    program: TritonProgram,
    chosen: Chosen,
    gpu: str,
    tune: Callable[[list[TritonKernel]], Chosen],
    time_program: Callable[[Chosen], float],
    log: Callable[[str], None] | None = None,
) -> Chosen:
    """``chosen``, or the same with the kernels not in ``tl.dot`` form put in
    it where the whole program runs faster so (the module's docstring).
    ``tune`` tunes kernels (``autotune.tune``); ``time_program`` gives the µs
    of one call of the program built from a choice."""
    others = other_forms(program, chosen)
    if not others:
        return chosen
    key = verdict_key(program, gpu)
    verdict = cached_verdict(key)
    if verdict == "tuned":
        return chosen
    dots = tune([dot_only(k) for k in others])
    alternative = {**chosen, **dots}
    if verdict == "dot":
        return alternative
    timings = {"tuned": time_program(chosen), "dot": time_program(alternative)}
    keep = min(timings, key=lambda name: timings[name])
    store_verdict(key, keep, timings)
    if log is not None:
        log(
            f"forms of {program.function}: {timings['tuned']:.1f} µs as tuned, "
            f"{timings['dot']:.1f} µs with tl.dot in {len(others)} kernel(s): "
            f"keeping {'the tuned forms' if keep == 'tuned' else 'tl.dot'}"
        )
    return chosen if keep == "tuned" else alternative
