"""Checking candidates: screened on random floats, then verified.

A worker screens a plan's cheapest instantiation by running it at full shapes
on the search's random inputs (:func:`screen`): cheap, and it throws out most
wrong µGraphs. The main process then verifies the survivors with the
finite-field verifier, cheapest first (:func:`verified`).
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import closing

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.search.adapters import check_equivalent, close, float_outputs
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.pool import one_blas_thread
from mirage_xdsl.search.report import SCREENING, Candidate, Report, failure
from mirage_xdsl.search.ugraph import UGraph, to_module
from mirage_xdsl.verify.finite_field_torch import gpu_arithmetic

SCREEN_RANGE = (0.0, 1.0)
"""The range screening inputs are drawn from. Non-negative, so that a sum of
products of inputs never cancels: a 0/1 mask multiplied after ``exp`` (a
masked softmax) drawn from [-1, 1] makes some rows' denominators sums of
mixed signs near zero, where the same fp32 arithmetic in another order
differs by more than the tolerance (seen at 512 keys) while a wrong
candidate still differs by O(1) on these inputs."""


def screen(
    graph: UGraph, inputs: Sequence[np.ndarray], refs: Sequence[np.ndarray]
) -> tuple[bool, str]:
    """Whether ``graph`` computes ``refs`` from ``inputs``, and, when it could
    not even be built or run, why (a line for ``Report.failures``).

    Any error counts against the candidate, not the search: the µGraph is
    generated, and where it breaks the interpreter (a shape, an op it cannot
    run at these sizes) the error can be of any type."""
    try:
        return close(float_outputs(to_module(graph), inputs), refs), ""
    except Exception as e:
        return False, failure(f"{SCREENING}a {graph.kernels}-kernel candidate", e)


PARALLEL_VERDICT_SECONDS = 2.0
"""A first verdict slower than this sends the rest to a pool of processes."""


def verified(
    program: ModuleOp,
    ranked: list[Candidate],
    want: int,
    options: SearchOptions,
    report: Report,
    deadline: float = math.inf,
) -> list[Candidate]:
    """The first ``want`` of ``ranked`` that the verifier accepts, or those
    accepted by ``deadline`` (no wave starts after it)."""
    with closing(verifying(program, ranked, want, options, report, deadline)) as it:
        return list(it)


def verifying(
    program: ModuleOp,
    ranked: list[Candidate],
    want: int,
    options: SearchOptions,
    report: Report,
    deadline: float = math.inf,
) -> Iterator[Candidate]:
    """The candidates of ``ranked`` that the verifier accepts, in rank order,
    at most ``want``, each verified when the next is asked for (so a caller
    that stops asking verifies no more); none after ``deadline`` (no wave
    starts after it). The seconds spent verifying add to the report's
    ``verify`` phase.

    Verdicts are taken in rank order, so the answer is the same as verifying
    one by one. When one verdict takes long (full shapes, many blocks), there
    are cores to spare and no GPU runs the verdicts, the rest are verified in
    waves across forked worker processes. Forked, not spawned: a spawned process re-runs the
    user's main script, which need not guard its call to the search. The
    search's own worker pool is closed (and its threads joined) by then."""
    from mirage_xdsl.ir.printing import module_text

    program_text = module_text(program)
    # verdicts on the GPU stay here: forked workers could only take them to
    # the CPU, many times slower at full shapes (minutes per verdict for
    # attention over 2048 tokens)
    on_gpu = gpu_arithmetic() is not None
    found = 0
    position = 0
    executor = None
    try:
        while position < len(ranked) and found < want:
            if time.monotonic() > deadline:
                report.stopped = report.stopped or "budget"
                break
            width = _wave_width(executor, want - found, options)
            wave = ranked[position : position + width]
            position += len(wave)
            jobs = [
                (module_text(to_module(c.graph)), program_text, options) for c in wave
            ]
            started = time.monotonic()
            results = list(
                executor.map(verify_one, jobs) if executor else map(verify_one, jobs)
            )
            seconds = time.monotonic() - started
            report.phases["verify"] = report.phases.get("verify", 0.0) + seconds
            accepted = []
            for c, (equivalent, method) in zip(wave, results, strict=True):
                if found + len(accepted) >= want:
                    break
                report.verifier = method
                if equivalent:
                    accepted.append(c)
                    report.verified += 1
                else:
                    report.rejected += 1
            found += len(accepted)
            yield from accepted
            slow = seconds > PARALLEL_VERDICT_SECONDS
            workers = min(options.workers(), want - found, len(ranked) - position)
            if executor is None and slow and workers > 1 and not on_gpu:
                executor = verifier_pool(workers)
    finally:
        if executor is not None:
            executor.shutdown(cancel_futures=True)


def _wave_width(executor: Executor | None, needed: int, options: SearchOptions) -> int:
    if executor is None:
        return 1
    return max(1, min(options.workers(), needed))


def verifier_pool(workers: int) -> Executor:
    return ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=one_blas_thread,
    )


def verify_one(job: tuple[str, str, SearchOptions]) -> tuple[bool, str]:
    from mirage_xdsl.ir.context import make_context
    from mirage_xdsl.ir.diagnostics import parse

    candidate_text, program_text, options = job
    ctx = make_context()
    check = check_equivalent(
        parse(ctx, candidate_text, "<candidate>"),
        parse(ctx, program_text, "<program>"),
        options.trials,
        options.seed,
    )
    return check.equivalent, check.method
