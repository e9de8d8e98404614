"""Equality saturation decides ``⊑``: known answers, bounds, and agreement.

The e-graph is the oracle's fallback, so it is checked three ways: on queries
whose answer is known (including the step the normal forms leave undecided),
on what it does when a bound stops saturation (unknown, never "no"), and
against the normal-form fast path on the query corpus of
:mod:`mirage_xdsl.search.pruning.expr_corpus`, where the two must give the
same answer whenever both decide.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from test_subexpr_agreement import TARGET_SETS

pytest.importorskip("egglog")  # the optional extra mirage-xdsl[egraph]

from mirage_xdsl.search.pruning.abstract_expr import Expr
from mirage_xdsl.search.pruning.expr_corpus import query_corpus
from mirage_xdsl.search.pruning.subexpr_egraph import EGraphSubexpr, sexpr
from mirage_xdsl.search.pruning.subexpr_oracle import SubexprOracle

P = Expr.parse

GQA = (
    "sum(4096, mul(div(exp(sum(64, mul(Q, K))), "
    "sum(4096, exp(sum(64, mul(Q, K))))), V))"
)
TWO_FACTOR_DEN = "div(x, mul(add(a, b), add(c, d)))"

KNOWN = [
    # (query, target, answer)
    ("mul(x, y)", "add(mul(x, y), z)", True),
    ("add(x, z)", "add(x, add(y, z))", True),  # associativity, commutativity
    ("sum(2, x)", "sum(4, x)", True),  # sum(4, x) = sum(2, sum(2, x))
    ("sum(6, mul(x, y))", "mul(sum(12, x), y)", True),  # sums move into factors
    ("add(mul(a, c), mul(b, c))", "mul(add(a, b), c)", True),  # distributivity
    ("sum(64, mul(Q, K))", GQA, True),
    ("sum(4096, exp(sum(64, mul(Q, K))))", GQA, True),
    ("mul(exp(sum(64, mul(Q, K))), V)", GQA, True),
    # The normal forms leave these undecided: a two-term denominator out of a
    # four-term one.
    ("div(x, add(a, b))", TWO_FACTOR_DEN, True),
    ("div(x, add(c, d))", TWO_FACTOR_DEN, True),
    ("div(x, add(a, c))", TWO_FACTOR_DEN, False),
    ("exp(V)", GQA, False),
    ("sum(3, x)", "sum(4, x)", False),
    ("add(x, y)", "mul(x, y)", False),
    ("mul(x, add(a, b))", TWO_FACTOR_DEN, False),
    ("sum(128, mul(Q, K))", GQA, False),
    ("mul(Q, V)", GQA, False),
]


@pytest.mark.parametrize("query,target,answer", KNOWN)
def test_known_answer(query: str, target: str, answer: bool):
    assert EGraphSubexpr([P(target)]).decide(P(query)) is answer


def test_fast_path_leaves_the_denominator_quotient_undecided():
    # What makes the fallback necessary: these are the fast path's unknowns.
    oracle = SubexprOracle([P(TWO_FACTOR_DEN)], use_fallback=False)
    for query in ("div(x, add(a, b))", "div(x, add(a, c))"):
        assert oracle.fast_is_subexpr(P(query)) is None


def test_oracle_takes_the_fallback_answer():
    target = [P(TWO_FACTOR_DEN)]
    oracle = SubexprOracle(target)
    assert oracle.is_subexpr(P("div(x, add(a, b))")) is True
    assert oracle.is_subexpr(P("div(x, add(a, c))")) is False
    assert oracle.stats.fallback_decided == 2
    assert oracle.stats.undecided == 0
    # Without the fallback the undecided query is kept.
    assert SubexprOracle(target, use_fallback=False).is_subexpr(P("div(x, add(a, c))"))


def test_a_bound_gives_unknown_never_no():
    bounded = EGraphSubexpr([P(GQA)], max_iterations=2)
    assert not bounded.targets.saturated
    assert bounded.decide(P("exp(V)")) is None
    # A proof found before the bound still counts.
    assert bounded.decide(P("mul(Q, K)")) is True
    assert EGraphSubexpr([P(GQA)]).targets.saturated


def test_sums_are_prime_chains():
    assert sexpr(P("sum(12, x)")) == '(Sum 3 (Sum 2 (Sum 2 (Var "x"))))'
    with pytest.raises(ValueError):
        sexpr(Expr("concat", (P("x"), P("y")), (-1, (1, 1))))


def agrees_with_fast_path(
    decide: Callable[[Expr], bool | None],
    name: str,
    ts: list[Expr],
    count: int,
    *others: Callable[[Expr], bool | None],
) -> None:
    """``decide`` answers every corpus query, yes for the subexpressions by
    construction, as the fast path does wherever it answers, and as each of
    ``others`` does."""
    rng = random.Random(name)
    oracle = SubexprOracle(ts, use_fallback=False)
    for query, by_construction in query_corpus(ts, rng, count):
        verdict = decide(query)
        assert verdict is not None, str(query)
        if by_construction:
            assert verdict is True, str(query)
        fast = oracle.fast_is_subexpr(query)
        if fast is not None:
            assert fast == verdict, str(query)
        for other in others:
            assert other(query) == verdict, str(query)


def _check_against_fast_path(name: str, ts: list[Expr], count: int) -> None:
    egraph = EGraphSubexpr(ts)
    assert egraph.targets.saturated, name
    agrees_with_fast_path(egraph.decide, name, ts, count)


@pytest.mark.parametrize("name,ts", TARGET_SETS, ids=[n for n, _ in TARGET_SETS])
def test_fast_path_agrees_with_egraph(name: str, ts: list[Expr]):
    _check_against_fast_path(name, ts, 16 if name.startswith("random") else 40)


@pytest.mark.slow
@pytest.mark.parametrize("name,ts", TARGET_SETS, ids=[n for n, _ in TARGET_SETS])
def test_fast_path_agrees_with_egraph_large(name: str, ts: list[Expr]):
    _check_against_fast_path(f"{name}-large", ts, 400)
