"""The abstract-expression axioms as a z3 theory.

Terms live in an uninterpreted sort ``T``; ``add``, ``mul``, ``div`` and the
unary heads (``exp``, ``sqrt``, ``silu``, the activations: ``UNARY_HEADS``)
are uninterpreted functions and ``subexpr`` a predicate.
The equivalence and subexpression axioms of ``seeds/001`` are quantified
formulas with E-matching patterns (both sides of each equation), so z3
instantiates them only on terms that occur.

Counts. The paper writes ``sum(i, x)`` with an integer ``i`` and the axiom
``sum(i, sum(j, x)) = sum(i*j, x)``. Our counts are positive, and positive
integers under multiplication are the free commutative monoid over the
primes, so ``sum(k, .)`` is encoded as the composition of one unary function
``sum_p`` per prime factor ``p`` of ``k`` (with multiplicity). Then
``sum(1, x) = x`` and ``sum(i*j, x) = sum(i, sum(j, x))`` hold by construction
once the ``sum_p`` commute (an axiom), and each per-count axiom becomes one
axiom per prime. This keeps z3 out of nonlinear integer arithmetic.

z3 is used as a prover: ``unsat`` of the negated query proves it. With these
axioms it cannot refute (the theory has no small finite countermodels for
the interesting cases), so a query it does not prove within the timeout is
``None`` and callers keep the candidate.
"""

from __future__ import annotations

from collections.abc import Sequence

import z3

from mirage_xdsl.search.pruning import abstract_expr as ae
from mirage_xdsl.search.pruning.abstract_expr import Expr


def prime_factors(k: int) -> list[int]:
    out, p = [], 2
    while p * p <= k:
        while k % p == 0:
            out.append(p)
            k //= p
        p += 1
    if k > 1:
        out.append(k)
    return out


class Z3Axioms:
    """One z3 solver holding the axioms; queries run in push/pop scopes."""

    def __init__(self, timeout_ms: int = 1000):
        self.ctx = z3.Context()
        self.timeout_ms = timeout_ms
        self.sort = z3.DeclareSort("T", self.ctx)
        t, b = self.sort, z3.BoolSort(self.ctx)
        self.fn = {name: z3.Function(name, t, t, t) for name in ae.BINARY_HEADS} | {
            name: z3.Function(name, t, t) for name in ae.UNARY_HEADS
        }
        self.sub = z3.Function("subexpr", t, t, b)
        self.sums: dict[int, z3.FuncDeclRef] = {}
        self.vars: dict[str, z3.ExprRef] = {}
        self.solver = z3.Solver(ctx=self.ctx)
        self.solver.set("timeout", timeout_ms)
        self._add_base_axioms()

    # --- axioms --------------------------------------------------------------

    def _forall(self, n: int, body, patterns) -> None:
        xs = z3.Consts(" ".join(f"x{i}" for i in range(n)), self.sort)
        self.solver.add(z3.ForAll(xs, body(*xs), patterns=[p(*xs) for p in patterns]))

    def _equation(self, n: int, lhs, rhs) -> None:
        self._forall(n, lambda *x: lhs(*x) == rhs(*x), [lhs, rhs])

    def _add_base_axioms(self) -> None:
        add, mul, div = self.fn["add"], self.fn["mul"], self.fn["div"]
        sub = self.sub
        eq = self._equation
        eq(2, lambda x, y: add(x, y), lambda x, y: add(y, x))
        eq(2, lambda x, y: mul(x, y), lambda x, y: mul(y, x))
        eq(3, lambda x, y, z: add(x, add(y, z)), lambda x, y, z: add(add(x, y), z))
        eq(3, lambda x, y, z: mul(x, mul(y, z)), lambda x, y, z: mul(mul(x, y), z))
        eq(
            3,
            lambda x, y, z: add(mul(x, z), mul(y, z)),
            lambda x, y, z: mul(add(x, y), z),
        )
        eq(
            3,
            lambda x, y, z: add(div(x, z), div(y, z)),
            lambda x, y, z: div(add(x, y), z),
        )
        eq(3, lambda x, y, z: mul(x, div(y, z)), lambda x, y, z: div(mul(x, y), z))
        eq(3, lambda x, y, z: div(div(x, y), z), lambda x, y, z: div(x, mul(y, z)))
        for op in (add, mul, div):
            self._forall(
                2,
                lambda x, y, op=op: z3.And(sub(x, op(x, y)), sub(y, op(x, y))),
                [lambda x, y, op=op: op(x, y)],
            )
        for name in ae.UNARY_HEADS:
            f = self.fn[name]
            self._forall(1, lambda x, f=f: sub(x, f(x)), [lambda x, f=f: f(x)])
        x = z3.Const("r", self.sort)
        self.solver.add(z3.ForAll([x], sub(x, x)))
        self._forall(
            3,
            lambda x, y, z: z3.Implies(z3.And(sub(x, y), sub(y, z)), sub(x, z)),
            [lambda x, y, z: z3.MultiPattern(sub(x, y), sub(y, z))],
        )

    def _sum_fn(self, p: int) -> z3.FuncDeclRef:
        """``sum_p`` with its axioms, declared on first use."""
        if p in self.sums:
            return self.sums[p]
        s = z3.Function(f"sum{p}", self.sort, self.sort)
        add, mul, div = self.fn["add"], self.fn["mul"], self.fn["div"]
        eq = self._equation
        eq(2, lambda x, y: s(add(x, y)), lambda x, y: add(s(x), s(y)))
        eq(2, lambda x, y: s(mul(x, y)), lambda x, y: mul(s(x), y))
        eq(2, lambda x, y: s(div(x, y)), lambda x, y: div(s(x), y))
        self._forall(1, lambda x: self.sub(x, s(x)), [lambda x: s(x)])
        for q in self.sums.values():
            eq(1, lambda x, q=q: s(q(x)), lambda x, q=q: q(s(x)))
        self.sums[p] = s
        return s

    # --- terms ---------------------------------------------------------------

    def term(self, e: Expr) -> z3.ExprRef:
        if e.head == "var":
            if e.param not in self.vars:
                self.vars[e.param] = z3.Const(f"v_{e.param}", self.sort)
            return self.vars[e.param]
        if e.head == "sum":
            out = self.term(e.args[0])
            for p in prime_factors(e.param):
                out = self._sum_fn(p)(out)
            return out
        if e.head == "concat":
            raise ValueError("split piecewise terms before encoding them")
        return self.fn[e.head](*(self.term(a) for a in e.args))

    # --- queries -------------------------------------------------------------

    def _prove(self, goal_builder, timeout_ms: int | None) -> bool | None:
        # Encode first: new sum functions add axioms at the base level.
        goal = goal_builder()
        self.solver.push()
        try:
            self.solver.set("timeout", timeout_ms or self.timeout_ms)
            self.solver.add(z3.Not(goal))
            result = self.solver.check()
        finally:
            self.solver.pop()
        if result == z3.unsat:
            return True
        if result == z3.sat:
            return False
        return None

    def prove_subexpr(
        self, e: Expr, targets: Sequence[Expr], timeout_ms: int | None = None
    ) -> bool | None:
        """True if z3 proves ``e ⊑ t`` for some target, False if it refutes it."""
        return self._prove(
            lambda: z3.Or([self.sub(self.term(e), self.term(t)) for t in targets]),
            timeout_ms,
        )

    def prove_equal(
        self, a: Expr, b: Expr, timeout_ms: int | None = None
    ) -> bool | None:
        return self._prove(lambda: self.term(a) == self.term(b), timeout_ms)
