"""Subexpressions decided on an e-graph saturated under the axioms (egglog).

``e ⊑ t`` holds iff some chain ``t ≡ t₀ ▷ t₁ ≡ t₁' ▷ ... ≡ e`` exists, where
``≡`` is equality under the equivalence axioms and ``▷`` takes an immediate
argument. An e-graph represents many equal terms at once: each e-class is a
set of equal terms, each e-node an operator applied to e-classes. Once the
e-graph is *saturated* (applying any axiom, in either direction, at any match
adds nothing), every term equal to a represented term is represented in the
same class, and classes only ever merge when their terms are equal. So the
classes reachable from a target's class by following e-node children are
exactly the classes of its subexpressions, and ``e ⊑ t`` iff ``e``'s class is
among them.

The procedure: the target terms go into an egglog e-graph with the
equivalence axioms as bidirectional rewrites and a relation ``in_t`` of the
classes reachable from a target (a Datalog rule per head, closed under
children). The targets are saturated once. Each query is added in a
``push``/``pop`` scope, the e-graph is saturated again, and the query answers
``in_t`` of its class.

Guarantee. Every rewrite is an instance of an axiom, so a "yes" is a proof.
A "no" is given only when both the targets and the query saturated within the
bounds; then the answer is exact. When a bound (iterations, e-nodes) stops
saturation first, a query not found is ``None`` (unknown), never "no": the
procedure never drops a real subexpression.

Counts. As in :mod:`~mirage_xdsl.search.pruning.axioms`, ``sum(k, x)`` is a
chain of ``sum_p`` (one per prime factor ``p`` of ``k``), so ``sum(1, x) = x``
and ``sum(i·j, x) = sum(i, sum(j, x))`` hold by construction once the prime
sums commute; the e-graph holds one class per partial product of the primes
instead of one per factorisation of ``k``.

Why egglog. Equality saturation is what the original Mirage moved to for this
check; egglog does the matching, rebuilding and Datalog in compiled code, and
``push``/``pop`` let every query start from the saturated targets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from egglog.bindings import EggSmolError, EGraph

from mirage_xdsl.search.pruning import abstract_expr as ae
from mirage_xdsl.search.pruning.abstract_expr import Expr
from mirage_xdsl.search.pruning.axioms import prime_factors

PRELUDE = """
(datatype T
  (Var String)
  (Add T T)
  (Mul T T)
  (Div T T)
  (Un String T)
  (Sum i64 T))
(relation in_t (T))
(ruleset axioms)
(ruleset reach)

(birewrite (Add x y) (Add y x) :ruleset axioms)
(birewrite (Mul x y) (Mul y x) :ruleset axioms)
(birewrite (Add x (Add y z)) (Add (Add x y) z) :ruleset axioms)
(birewrite (Mul x (Mul y z)) (Mul (Mul x y) z) :ruleset axioms)
(birewrite (Add (Mul x z) (Mul y z)) (Mul (Add x y) z) :ruleset axioms)
(birewrite (Add (Div x z) (Div y z)) (Div (Add x y) z) :ruleset axioms)
(birewrite (Mul x (Div y z)) (Div (Mul x y) z) :ruleset axioms)
(birewrite (Div (Div x y) z) (Div x (Mul y z)) :ruleset axioms)
(birewrite (Sum p (Add x y)) (Add (Sum p x) (Sum p y)) :ruleset axioms)
(birewrite (Sum p (Mul x y)) (Mul (Sum p x) y) :ruleset axioms)
(birewrite (Sum p (Div x y)) (Div (Sum p x) y) :ruleset axioms)
(rewrite (Sum p (Sum q x)) (Sum q (Sum p x)) :ruleset axioms)

(rule ((in_t (Add a b))) ((in_t a) (in_t b)) :ruleset reach)
(rule ((in_t (Mul a b))) ((in_t a) (in_t b)) :ruleset reach)
(rule ((in_t (Div a b))) ((in_t a) (in_t b)) :ruleset reach)
(rule ((in_t (Un h a))) ((in_t a)) :ruleset reach)
(rule ((in_t (Sum p a))) ((in_t a)) :ruleset reach)
"""
"""The axioms of ``seeds/001`` (``docs/abstract_expressions.md``) as rewrites,
``Sum p`` for a prime ``p``, and reachability from the targets. The
subexpression axioms need no rules of their own: ``in_t`` follows every
e-node's children, which is the immediate-argument step, and reflexivity and
transitivity are the closure."""


def sexpr(e: Expr) -> str:
    """The egglog term of a non-piecewise abstract expression."""
    h = e.head
    if h == "var":
        return f'(Var "{e.param}")'
    if h == "sum":
        out = sexpr(e.args[0])
        for p in prime_factors(e.param):
            out = f"(Sum {p} {out})"
        return out
    if h in ae.UNARY_HEADS:
        return f'(Un "{h}" {sexpr(e.args[0])})'
    if h in ae.BINARY_HEADS:
        a, b = (sexpr(x) for x in e.args)
        return f"({h.capitalize()} {a} {b})"
    raise ValueError("split piecewise (concat) terms before encoding them")


@dataclass
class Saturation:
    """How a saturation run ended: ``saturated`` or stopped by a bound."""

    saturated: bool
    iterations: int
    nodes: int


class EGraphSubexpr:
    """Decides ``e ⊑ t`` for fixed targets on a saturated egglog e-graph.

    ``max_iterations`` and ``max_nodes`` bound each saturation (targets once,
    then each query on top of them); past either bound, unfound queries are
    unknown. An iteration applies every rule once, so the node bound can be
    overshot by one iteration's growth.
    """

    def __init__(
        self,
        targets: Sequence[Expr],
        *,
        max_iterations: int = 64,
        max_nodes: int = 100_000,
    ):
        self.max_iterations = max_iterations
        self.max_nodes = max_nodes
        self._egraph = EGraph()
        self._run(PRELUDE)
        terms = [p for t in targets for p in ae.pieces(t)]
        self._run(
            "".join(
                f"(let $t{i} {sexpr(t)})\n(in_t $t{i})\n" for i, t in enumerate(terms)
            )
        )
        self.targets = self._saturate()

    def _run(self, program: str) -> list:
        return self._egraph.run_program(*self._egraph.parse_program(program))

    def _nodes(self) -> int:
        (sizes,) = self._run("(print-size)")
        return sum(n for name, n in sizes.sizes if name != "in_t")

    def _saturate(self) -> Saturation:
        """Apply the axioms until nothing changes or a bound is hit."""
        nodes = self._nodes()
        saturated = False
        iterations = 0
        while iterations < self.max_iterations and nodes <= self.max_nodes:
            (out,) = self._run("(run axioms 1)")
            iterations += 1
            nodes = self._nodes()
            if not out.report.updated:
                saturated = True
                break
        self._run("(run-schedule (saturate (run reach)))")
        return Saturation(saturated, iterations, nodes)

    def decide(self, e: Expr) -> bool | None:
        """``e ⊑`` some target: True, False (exact), or None (a bound was hit)."""
        query = sexpr(e)
        self._run("(push)")
        try:
            self._run(f"(let $q {query})")
            run = self._saturate()
            try:
                self._run("(check (in_t $q))")
                return True
            except EggSmolError:
                pass
            return False if run.saturated and self.targets.saturated else None
        finally:
            self._run("(pop)")
