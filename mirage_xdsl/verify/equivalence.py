"""Probabilistic equivalence of two µGraph programs.

:func:`equivalent` runs both programs on the same random inputs in the
finite-field domain (``finite_field.py``), several independent trials. A
mismatch proves the programs differ; agreement on every trial leaves a
false-positive probability that the verdict states, computed from the
programs' degrees (``fingerprint_bound.py``; derivation in
``docs/verifier.md``). By default it runs just enough trials to bring that
bound to 2^-40 or below.

:func:`float_check` is a second opinion from the fp32 reference interpreter.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation

from mirage_xdsl.semantics.inputs import random_inputs
from mirage_xdsl.semantics.interpreter import entry_function, run
from mirage_xdsl.verify.buffer_pool import pool
from mirage_xdsl.verify.fingerprint_bound import program_degrees, trial_bound
from mirage_xdsl.verify.fingerprint_slice import (
    ResidueSlice,
    exponent_only_ops,
    residue_slice,
)
from mirage_xdsl.verify.finite_field import FiniteFieldDomain
from mirage_xdsl.verify.finite_field_torch import gpu_arithmetic
from mirage_xdsl.verify.residue_arith import NUMPY

TARGET_BOUND = 2.0**-40
"""The false-positive probability an accepting verdict aims for by default."""
MAX_TRIALS = 16
"""Most trials the default policy runs, even if the bound is still larger."""
MAX_VOID_TRIALS = 4
"""Trials allowed to hit a zero divisor (and be redrawn) before giving up."""

FLOAT_RTOL = 1e-3
"""Default float cross-check tolerance: relative Frobenius error per output."""
FLOAT_INPUT_RANGE = 0.5
"""Float cross-check inputs are uniform in [-0.5, 0.5]: exp stays finite."""


@dataclass(frozen=True)
class Verdict:
    equivalent: bool
    trials: int
    false_positive_bound: float
    """Probability that two non-equivalent programs get this (accepting)
    verdict; 0.0 for a rejection, which is certain up to the caveats in the
    reason."""
    reason: str
    seconds: float = 0.0
    per_trial_bound: float = 1.0

    def __bool__(self) -> bool:
        return self.equivalent


def _types(module: ModuleOp) -> tuple[list[TensorType], list[TensorType]]:
    ty = entry_function(module).function_type
    return list(ty.inputs.data), list(ty.outputs.data)  # type: ignore[arg-type]


def _describe(ty: TensorType) -> str:
    return f"{list(ty.get_shape())} of {ty.element_type}"


def signature_mismatch(a: ModuleOp, b: ModuleOp) -> str | None:
    """Why two programs cannot be compared, or None if their signatures agree."""
    for kind, xs, ys in zip(("input", "output"), _types(a), _types(b), strict=True):
        if len(xs) != len(ys):
            return f"the programs have {len(xs)} and {len(ys)} {kind}s"
        for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
            if x != y:
                return f"{kind} #{i} is {_describe(x)} in the first program and {_describe(y)} in the second"
    return None


def default_arithmetic() -> Any:
    """A CUDA GPU through torch when one is visible, else numpy on the CPU."""
    return gpu_arithmetic() or NUMPY


def trials_for(per_trial: float, target: float = TARGET_BOUND) -> int:
    """Fewest trials whose combined bound ``per_trial ** n`` reaches ``target``."""
    if per_trial <= 0.0:
        return 1
    if per_trial >= 1.0:
        return MAX_TRIALS
    return min(MAX_TRIALS, max(1, math.ceil(math.log(target) / math.log(per_trial))))


def equivalent(
    program_a: ModuleOp,
    program_b: ModuleOp,
    *,
    trials: int | None = None,
    seed: int = 0,
    target: float = TARGET_BOUND,
    arith: Any = None,
) -> Verdict:
    """Decide whether two programs compute the same function, probabilistically.

    ``trials=None`` runs as many trials as the target bound needs. ``arith``
    says where the arithmetic runs (``residue_arith.NUMPY``, or
    ``finite_field_torch.TorchArithmetic(device)``); by default a GPU when torch sees
    one, else numpy. Every choice gives the same verdict.
    """
    start = time.perf_counter()
    mismatch = signature_mismatch(program_a, program_b)
    if mismatch is not None:
        return Verdict(False, 0, 0.0, f"signatures differ: {mismatch}")
    per_trial = trial_bound(
        program_degrees(program_a), program_degrees(program_b)
    ).total
    shapes = [tuple(ty.get_shape()) for ty in _types(program_a)[0]]

    def differ(domain: FiniteFieldDomain, xs: list[Any]) -> str | None:
        outs_a = run(program_a, xs, domain)
        outs_b = run(program_b, xs, domain)
        for i, (x, y) in enumerate(zip(outs_a, outs_b, strict=True)):
            if not domain.equal(x, y):
                return f"output #{i} differs at index {list(domain.first_difference(x, y))}"
        return None

    return fingerprint_trials(
        differ,
        shapes,
        residue_slice(program_a) | residue_slice(program_b),
        exponent_only_ops(program_a) | exponent_only_ops(program_b),
        per_trial,
        wanted=trials if trials is not None else trials_for(per_trial, target),
        seed=seed,
        arith=arith,
        start=start,
    )


def fingerprint_trials(
    differ: Callable[[FiniteFieldDomain, list[Any]], str | None],
    shapes: list[tuple[int, ...]],
    needs_q: ResidueSlice,
    exponent_only: frozenset[Operation],
    per_trial: float,
    *,
    wanted: int,
    seed: int,
    arith: Any,
    start: float,
    agreeing: str = "all outputs",
) -> Verdict:
    """Run ``wanted`` finite-field trials and give the verdict.

    Each trial draws a fresh domain and random inputs of ``shapes`` (with a
    ``q`` slice where ``needs_q`` says), then asks ``differ`` where the
    programs first disagree on them. A disagreement rejects, unless the trial
    divided by zero: then it is void and redrawn, at most ``MAX_VOID_TRIALS``
    times. ``agreeing`` names what agreed in the accepting reason; ``start``
    is when the check began, for the verdict's time.
    """
    arith = arith if arith is not None else default_arithmetic()
    rng = np.random.default_rng(seed)
    done = void = 0
    while done < wanted:
        domain = FiniteFieldDomain(
            rng, arith, exp_keeps_q=needs_q.nested, exponent_only=exponent_only
        )
        xs = [
            domain.random(rng, s, with_q=i in needs_q.inputs)
            for i, s in enumerate(shapes)
        ]
        difference = differ(domain, xs)
        if difference is None:
            done += 1
            continue
        if domain.zero_divisors and void < MAX_VOID_TRIALS:
            void += 1  # a division by zero makes this trial void; redraw
            continue
        caveat = (
            f" ({domain.zero_divisors} divisions by zero in this trial)"
            if domain.zero_divisors
            else ""
        )
        return Verdict(
            False,
            done + 1,
            0.0,
            f"{difference} in trial {done + 1}{caveat}",
            time.perf_counter() - start,
            per_trial,
        )
    pool().trim()
    return Verdict(
        True,
        done,
        per_trial**done,
        f"{agreeing} agree on {done} random trial(s) over Z_p x Z_q",
        time.perf_counter() - start,
        per_trial,
    )


@dataclass(frozen=True)
class FloatCheck:
    agree: bool
    max_relative_error: float
    rtol: float
    reason: str


def float_check(
    program_a: ModuleOp,
    program_b: ModuleOp,
    *,
    rtol: float = FLOAT_RTOL,
    seed: int = 0,
) -> FloatCheck:
    """Compare two programs in fp32 on small random inputs.

    Inputs are fp16 values uniform in [-0.5, 0.5] (so exp stays finite and
    rms norms stay away from zero); per output, the relative Frobenius error
    ``|a - b| / |b|`` must be at most ``rtol`` (default 1e-3, far above fp32
    reassociation noise, far below any semantic difference).
    """
    mismatch = signature_mismatch(program_a, program_b)
    if mismatch is not None:
        return FloatCheck(False, math.inf, rtol, f"signatures differ: {mismatch}")
    xs = random_inputs(program_a, seed, -FLOAT_INPUT_RANGE, FLOAT_INPUT_RANGE)
    worst = 0.0
    for x, y in zip(run(program_a, xs), run(program_b, xs), strict=True):
        scale = float(np.linalg.norm(y))
        diff = float(np.linalg.norm(x - y))
        error = diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)
        worst = max(worst, error if math.isfinite(error) else math.inf)
    agree = worst <= rtol
    verdict = "agree" if agree else "disagree"
    return FloatCheck(
        agree,
        worst,
        rtol,
        f"{verdict} in fp32 (max relative error {worst:.3g}, rtol {rtol:.0e})",
    )
