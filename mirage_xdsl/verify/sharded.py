"""Equivalence of a tensor-parallel program and the unsharded one.

:func:`equivalent_sharded` draws random unsharded inputs in the finite field,
gives each shard its pieces (``semantics/sharding.py``), runs the shards
stage by stage with every ``kernel.all_reduce`` summing over them, and
compares with the unsharded program: pieces of a sharded output concatenated,
and every shard's copy of a replicated output on its own. A sum over shards
is a sum in the field, exact like every other, so the verdict and its
false-positive bound are those of :func:`~mirage_xdsl.verify.equivalence.equivalent`;
the degree bound counts an all-reduce as a sum of ``shards`` terms that may
have different denominators (``fingerprint_bound.py``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.semantics.interpreter import entry_function, run
from mirage_xdsl.semantics.sharding import Shard, ShardedProgram, run_stages
from mirage_xdsl.verify.buffer_pool import pool
from mirage_xdsl.verify.equivalence import (
    MAX_VOID_TRIALS,
    TARGET_BOUND,
    Verdict,
    default_arithmetic,
    trials_for,
)
from mirage_xdsl.verify.fingerprint_bound import program_degrees, trial_bound
from mirage_xdsl.verify.fingerprint_slice import exponent_only_ops, residue_slice
from mirage_xdsl.verify.finite_field import FiniteFieldDomain


def _difference(
    domain: FiniteFieldDomain,
    program: ShardedProgram,
    per_shard: list[list[Any]],
    expected: list[Any],
) -> str | None:
    """Where the shards' outputs first differ from the unsharded ones."""
    for i, (p, want) in enumerate(zip(program.outputs, expected, strict=True)):
        if isinstance(p, Shard):
            got = np.concatenate([outs[i] for outs in per_shard], axis=p.dim)
            copies = [("the shards' pieces of output", got)]
        else:
            copies = [
                (f"shard {r}'s output", outs[i]) for r, outs in enumerate(per_shard)
            ]
        for what, value in copies:
            if not domain.equal(value, want):
                where = list(domain.first_difference(value, want))
                return f"{what} #{i} differs at index {where}"
    return None


def equivalent_sharded(
    program: ShardedProgram,
    reference: ModuleOp,
    *,
    trials: int | None = None,
    seed: int = 0,
    target: float = TARGET_BOUND,
    arith: Any = None,
) -> Verdict:
    """Decide whether ``program``, run over its shards, computes what the
    unsharded ``reference`` does (probabilistically, as ``equivalent``)."""
    start = time.perf_counter()
    mismatch = program.mismatch(reference)
    if mismatch is not None:
        return Verdict(False, 0, 0.0, f"signatures differ: {mismatch}")
    per_trial = trial_bound(
        program_degrees(program.module), program_degrees(reference)
    ).total
    wanted = trials if trials is not None else trials_for(per_trial, target)
    staged = program.staged()
    fn = entry_function(reference)
    shapes = [tuple(ty.get_shape()) for ty in fn.function_type.inputs]  # type: ignore[attr-defined]
    needs_q = residue_slice(program.module) | residue_slice(reference)
    exponent_only = exponent_only_ops(reference).union(
        *(exponent_only_ops(stage.module) for stage in staged.stages)
    )
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
        expected = run(reference, xs, domain)
        pieces = [program.shard_inputs(xs, r) for r in range(program.shards)]
        difference = _difference(
            domain, program, run_stages(staged, pieces, domain), expected
        )
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
        f"all outputs of all {program.shards} shards agree on {done} random "
        "trial(s) over Z_p x Z_q",
        time.perf_counter() - start,
        per_trial,
    )
