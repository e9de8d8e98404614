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
from mirage_xdsl.verify.equivalence import (
    TARGET_BOUND,
    Verdict,
    fingerprint_trials,
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
    staged = program.staged()
    fn = entry_function(reference)
    shapes = [tuple(ty.get_shape()) for ty in fn.function_type.inputs]  # type: ignore[attr-defined]

    def differ(domain: FiniteFieldDomain, xs: list[Any]) -> str | None:
        expected = run(reference, xs, domain)
        pieces = [program.shard_inputs(xs, r) for r in range(program.shards)]
        return _difference(
            domain, program, run_stages(staged, pieces, domain), expected
        )

    return fingerprint_trials(
        differ,
        shapes,
        residue_slice(program.module) | residue_slice(reference),
        exponent_only_ops(reference).union(
            *(exponent_only_ops(stage.module) for stage in staged.stages)
        ),
        per_trial,
        wanted=trials if trials is not None else trials_for(per_trial, target),
        seed=seed,
        arith=arith,
        start=start,
        agreeing=f"all outputs of all {program.shards} shards",
    )
