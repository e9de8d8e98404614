"""The normal-form fast path agrees with z3 and with construction.

Queries come from :mod:`mirage_xdsl.search.pruning.expr_corpus`: subterms of targets
rewritten by random axiom applications (subexpressions by construction) and
local mutants of them, over the six workloads' targets and random targets.
z3 only ever proves (it cannot refute these theories), so agreement means:
whatever z3 proves, the fast path accepts; whatever the fast path accepts,
z3 proves (nearly always within the timeout); what the fast path rejects, z3
does not prove.
"""

from __future__ import annotations

import random

import pytest
from test_abstract_expr import INPUT_NAMES, targets

from mirage_xdsl.search.pruning.abstract_expr import Expr
from mirage_xdsl.search.pruning.axioms import Z3Axioms
from mirage_xdsl.search.pruning.expr_corpus import (
    query_corpus,
    random_rewrite,
    random_term,
)
from mirage_xdsl.search.pruning.normal_form import normal_form
from mirage_xdsl.search.pruning.subexpr_oracle import SubexprOracle

PROVE_MS = 3000
REFUTE_MS = 60


def _target_sets() -> list[tuple[str, list[Expr]]]:
    rng = random.Random(7)
    sets = [(w, targets(w, 1, 16)) for w in INPUT_NAMES]
    sets += [(f"random{i}", [random_term(rng, ["x", "y", "z"], 4)]) for i in range(24)]
    return sets


TARGET_SETS = _target_sets()


@pytest.mark.parametrize("name,ts", TARGET_SETS, ids=[n for n, _ in TARGET_SETS])
def test_fast_path_agrees_with_z3(name: str, ts: list[Expr]):
    rng = random.Random(name)
    oracle = SubexprOracle(ts)
    count = 24 if name in INPUT_NAMES else 8
    proved = unproved = 0
    for query, by_construction in query_corpus(ts, rng, count):
        fast = oracle.fast_is_subexpr(query)
        if by_construction:
            assert fast is True, str(query)
        if fast is True:
            z = oracle.z3_is_subexpr(query, PROVE_MS)
            assert z is not False, str(query)
            proved += z is True
            unproved += z is None
        elif fast is False:
            assert oracle.z3_is_subexpr(query, REFUTE_MS) is not True, str(query)
    assert unproved <= max(1, proved // 20)


@pytest.mark.parametrize(
    "name,ts", TARGET_SETS[:8], ids=[n for n, _ in TARGET_SETS[:8]]
)
def test_normal_form_is_invariant_under_the_axioms(name: str, ts: list[Expr]):
    rng = random.Random(name)
    axioms = Z3Axioms(PROVE_MS)
    for t in ts:
        for _ in range(6):
            r = random_rewrite(t, rng, 12)
            assert normal_form(r) == normal_form(t)
        assert axioms.prove_equal(t, random_rewrite(t, rng, 6)) is True
