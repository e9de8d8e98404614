"""Query corpora for the subexpression oracle: rewrites, prefixes, mutants.

The equivalence axioms double as rewrite rules (either direction). Applying
random rewrites to a target and taking a syntactic subterm of the result
gives a query that is a subexpression *by construction* (a chain of
equalities and immediate-subterm steps), independently of the normal-form
procedure and of z3; mutating a subterm gives queries that usually are not.
Tests use these to check the fast path against z3 and against the
construction, and ``tools/bench_abstract_expr.py`` times the oracle on them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from mirage_xdsl.search.pruning.abstract_expr import (
    Expr,
    add,
    div,
    exp,
    mul,
    sqrt,
    sum_,
    var,
)

Rewrite = Callable[[Expr], Expr | None]


def _h(e: Expr, head: str) -> bool:
    return e.head == head


def _comm(e: Expr) -> Expr | None:
    if e.head in ("add", "mul"):
        return Expr(e.head, (e.args[1], e.args[0]))
    return None


def _assoc_l(e: Expr) -> Expr | None:
    # op(x, op(y, z)) -> op(op(x, y), z)
    if e.head in ("add", "mul") and _h(e.args[1], e.head):
        x, (y, z) = e.args[0], e.args[1].args
        return Expr(e.head, (Expr(e.head, (x, y)), z))
    return None


def _assoc_r(e: Expr) -> Expr | None:
    if e.head in ("add", "mul") and _h(e.args[0], e.head):
        (x, y), z = e.args[0].args, e.args[1]
        return Expr(e.head, (x, Expr(e.head, (y, z))))
    return None


def _factor(e: Expr) -> Expr | None:
    # add(op(x, z), op(y, z)) -> op(add(x, y), z) for op in mul, div
    if e.head == "add":
        a, b = e.args
        if a.head == b.head and a.head in ("mul", "div") and a.args[1] == b.args[1]:
            return Expr(a.head, (add(a.args[0], b.args[0]), a.args[1]))
    return None


def _expand(e: Expr) -> Expr | None:
    if e.head in ("mul", "div") and _h(e.args[0], "add"):
        (x, y), z = e.args[0].args, e.args[1]
        return add(Expr(e.head, (x, z)), Expr(e.head, (y, z)))
    return None


def _mul_div_in(e: Expr) -> Expr | None:
    # mul(x, div(y, z)) -> div(mul(x, y), z)
    if e.head == "mul" and _h(e.args[1], "div"):
        x, (y, z) = e.args[0], e.args[1].args
        return div(mul(x, y), z)
    return None


def _mul_div_out(e: Expr) -> Expr | None:
    if e.head == "div" and _h(e.args[0], "mul"):
        (x, y), z = e.args[0].args, e.args[1]
        return mul(x, div(y, z))
    return None


def _div_div(e: Expr) -> Expr | None:
    # div(div(x, y), z) <-> div(x, mul(y, z))
    if e.head == "div" and _h(e.args[0], "div"):
        (x, y), z = e.args[0].args, e.args[1]
        return div(x, mul(y, z))
    if e.head == "div" and _h(e.args[1], "mul"):
        x, (y, z) = e.args[0], e.args[1].args
        return div(div(x, y), z)
    return None


def _sum_in(e: Expr) -> Expr | None:
    # sum(i, op(x, y)) -> op'(...): over add both, over mul/div the first
    if e.head != "sum":
        return None
    i, x = e.param, e.args[0]
    if x.head == "add":
        return add(sum_(i, x.args[0]), sum_(i, x.args[1]))
    if x.head in ("mul", "div"):
        return Expr(x.head, (sum_(i, x.args[0]), x.args[1]))
    if x.head == "sum":
        return sum_(i * x.param, x.args[0])
    return None


def _sum_out(e: Expr) -> Expr | None:
    if e.head in ("mul", "div") and _h(e.args[0], "sum"):
        i, x = e.args[0].param, e.args[0].args[0]
        return sum_(i, Expr(e.head, (x, e.args[1])))
    if e.head == "add" and all(_h(a, "sum") for a in e.args):
        a, b = e.args
        if a.param == b.param:
            return sum_(a.param, add(a.args[0], b.args[0]))
    return None


def _sum_split(e: Expr) -> Expr | None:
    # sum(i*j, x) -> sum(i, sum(j, x)) for the smallest prime i
    if e.head == "sum":
        k = e.param
        for p in range(2, k):
            if k % p == 0:
                return Expr("sum", (Expr("sum", e.args, k // p),), p)
    return None


REWRITES: tuple[Rewrite, ...] = (
    _comm,
    _assoc_l,
    _assoc_r,
    _factor,
    _expand,
    _mul_div_in,
    _mul_div_out,
    _div_div,
    _sum_in,
    _sum_out,
    _sum_split,
)
"""The equivalence axioms of ``seeds/001`` as rewrites (both directions)."""


def subterms(e: Expr) -> Iterator[Expr]:
    yield e
    for a in e.args:
        yield from subterms(a)


def _replace_at(e: Expr, index: int, f: Callable[[Expr], Expr | None]) -> Expr:
    """Apply ``f`` to the ``index``-th subterm (pre-order) of ``e``."""
    counter = [index]

    def go(t: Expr) -> Expr:
        if counter[0] == 0:
            counter[0] = -1
            return f(t) or t
        counter[0] -= 1
        args = tuple(go(a) for a in t.args)
        return t if args == t.args else Expr(t.head, args, t.param)

    return go(e)


def random_rewrite(e: Expr, rng: random.Random, steps: int = 8) -> Expr:
    """An equal term: ``steps`` random axiom applications at random places."""
    for _ in range(steps):
        size = sum(1 for _ in subterms(e))
        e = _replace_at(e, rng.randrange(size), rng.choice(REWRITES))
    return e


def mutate(e: Expr, rng: random.Random, names: list[str]) -> Expr:
    """A nearby term that is usually not equal: one local change."""

    def change(t: Expr) -> Expr | None:
        choice = rng.randrange(5)
        if choice == 0:
            return exp(t)
        if choice == 1 and t.head == "sum":
            return sum_(t.param * rng.choice([2, 3]), t.args[0])
        if choice == 2 and t.head in ("add", "mul", "div"):
            return Expr(rng.choice(["add", "mul", "div"]), t.args)
        if choice == 3:
            return mul(t, var(rng.choice(names)))
        return var(rng.choice(names)) if t.head != "var" else sqrt(t)

    size = sum(1 for _ in subterms(e))
    return _replace_at(e, rng.randrange(size), change)


def random_term(rng: random.Random, names: list[str], depth: int) -> Expr:
    if depth == 0 or rng.random() < 0.25:
        return var(rng.choice(names))
    head = rng.choice(["add", "mul", "div", "mul", "sum", "exp", "sum"])
    if head == "sum":
        return sum_(rng.choice([2, 3, 4, 6]), random_term(rng, names, depth - 1))
    if head == "exp":
        return exp(random_term(rng, names, depth - 1))
    return Expr(
        head,
        (random_term(rng, names, depth - 1), random_term(rng, names, depth - 1)),
    )


def query_corpus(
    targets: list[Expr], rng: random.Random, count: int
) -> list[tuple[Expr, bool | None]]:
    """Queries against ``targets``: (term, True if a subexpression by
    construction, None if unknown: mutants may still happen to be one)."""
    names = sorted(set().union(*(t.variables() for t in targets)))
    out: list[tuple[Expr, bool | None]] = []
    while len(out) < count:
        target = rng.choice(targets)
        rewritten = random_rewrite(target, rng, rng.randrange(0, 12))
        parts = list(subterms(rewritten))
        sub = rng.choice(parts)
        if rng.random() < 0.5:
            out.append((sub, True))
        else:
            out.append((mutate(sub, rng, names), None))
    return out
