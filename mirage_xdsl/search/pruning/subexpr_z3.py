"""Subexpressions decided by z3 on the axioms instantiated at the terms at hand.

The quantified theory of :mod:`~mirage_xdsl.search.pruning.axioms` lets z3
prove ``e ⊑ t`` but never refute it: with the axioms as ``forall`` formulas,
z3 cannot tell that it has run out of useful instances. Here z3 only sees a
*ground* (quantifier-free) formula, which it always decides:

- every node (a ground term: a variable, or a head applied to nodes) of the
  target and the query;
- one equation per axiom instance found by matching the axioms, in both
  directions, against the nodes *modulo the equalities asserted so far*
  (E-matching over congruence classes), with the instance's other side added
  as new nodes;
- Horn clauses ``R(t)`` for each target and ``R(f(a, b)) → R(a) ∧ R(b)`` for
  every node: ``R`` holds exactly on the classes reachable from a target by
  taking arguments, which is ``⊑`` (reflexive, transitive, immediate
  arguments) read on classes.

``e ⊑ t`` is asked as ``¬R(e)``. Instantiation runs in rounds: z3 checks the
formula; ``unsat`` is a proof (every equation is an instance of an axiom). On
``sat`` its model gives the congruence classes of the nodes (terms with the
same value), the axioms are matched against the classes, and the new
instances are asserted. A round that adds no node and merges no class means
the instances are closed: every term equal to a node is then a node of the
same class, so the reachable classes are exactly the subexpressions' and
``sat`` is a definite "no". A model can only equate more than the formula
forces, which finds more matches, never fewer, so the closure test is sound
even so.

Guarantee. "yes" is a proof; "no" is given only when instantiation closed
within the bounds (rounds, nodes) for both the targets and the query, and is
then exact; otherwise the answer is ``None`` (unknown). The procedure never
drops a real subexpression.

Counts are chains of one function per prime factor, as in
:mod:`~mirage_xdsl.search.pruning.axioms`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import z3

from mirage_xdsl.search.pruning import abstract_expr as ae
from mirage_xdsl.search.pruning.abstract_expr import Expr
from mirage_xdsl.search.pruning.axioms import prime_factors

# A pattern is a variable ("?x") or (head, param, args); a param starting
# with "?" binds a prime.
Pattern = str | tuple


def _p(head: str, *args: Pattern, param: object = None) -> tuple:
    return (head, param, args)


def _add(a: Pattern, b: Pattern) -> tuple:
    return _p("add", a, b)


def _mul(a: Pattern, b: Pattern) -> tuple:
    return _p("mul", a, b)


def _div(a: Pattern, b: Pattern) -> tuple:
    return _p("div", a, b)


def _sum(p: str, a: Pattern) -> tuple:
    return _p("sum", a, param=p)


X, Y, Z = "?x", "?y", "?z"

EQUATIONS: tuple[tuple[tuple, tuple], ...] = (
    (_add(X, Y), _add(Y, X)),
    (_mul(X, Y), _mul(Y, X)),
    (_add(X, _add(Y, Z)), _add(_add(X, Y), Z)),
    (_mul(X, _mul(Y, Z)), _mul(_mul(X, Y), Z)),
    (_add(_mul(X, Z), _mul(Y, Z)), _mul(_add(X, Y), Z)),
    (_add(_div(X, Z), _div(Y, Z)), _div(_add(X, Y), Z)),
    (_mul(X, _div(Y, Z)), _div(_mul(X, Y), Z)),
    (_div(_div(X, Y), Z), _div(X, _mul(Y, Z))),
    (_sum("?p", _add(X, Y)), _add(_sum("?p", X), _sum("?p", Y))),
    (_sum("?p", _mul(X, Y)), _mul(_sum("?p", X), Y)),
    (_sum("?p", _div(X, Y)), _div(_sum("?p", X), Y)),
    (_sum("?p", _sum("?q", X)), _sum("?q", _sum("?p", X))),
)
"""The equivalence axioms of ``seeds/001``, each used in both directions;
``sum`` is ``sum_p`` for a prime ``p``."""

RULES = tuple(EQUATIONS) + tuple((r, lhs) for lhs, r in EQUATIONS)

Key = tuple  # (head, param, child classes)


@dataclass
class Closure:
    """How instantiation ended: ``closed`` or stopped by a bound."""

    closed: bool
    rounds: int
    nodes: int


@dataclass
class _State:
    """The ground formula's nodes; copied per query, so queries stay apart."""

    terms: list[z3.ExprRef] = field(default_factory=list)
    keys: list[tuple] = field(default_factory=list)  # (head, param, child nodes)
    table: dict[tuple, int] = field(default_factory=dict)  # syntactic hash-cons

    def copy(self) -> _State:
        return _State(list(self.terms), list(self.keys), dict(self.table))


class Z3GroundSubexpr:
    """Decides ``e ⊑ t`` for fixed targets with ground axiom instances and z3.

    ``max_rounds`` and ``max_nodes`` bound instantiation (targets once, then
    each query on top of them); past either bound, unproved queries are
    unknown.
    """

    def __init__(
        self,
        targets: Sequence[Expr],
        *,
        max_rounds: int = 64,
        max_nodes: int = 50_000,
    ):
        self.max_rounds = max_rounds
        self.max_nodes = max_nodes
        self.ctx = z3.Context()
        self.sort = z3.DeclareSort("T", self.ctx)
        self.reach = z3.Function("R", self.sort, z3.BoolSort(self.ctx))
        self._fns: dict[tuple[str, object], z3.FuncDeclRef] = {}
        self.solver = z3.Solver(ctx=self.ctx)
        self._state = _State()
        roots = [self._encode(self._state, p) for t in targets for p in ae.pieces(t)]
        for r in roots:
            self.solver.add(self.reach(self._state.terms[r]))
        self.targets = self._close(self._state, None)

    # --- nodes -----------------------------------------------------------------

    def _fn(self, head: str, param: object) -> z3.FuncDeclRef:
        key = (head, param)
        if key not in self._fns:
            t = self.sort
            if head in ae.BINARY_HEADS:
                self._fns[key] = z3.Function(head, t, t, t)
            elif head == "sum":
                self._fns[key] = z3.Function(f"sum{param}", t, t)
            else:
                self._fns[key] = z3.Function(head, t, t)
        return self._fns[key]

    def _node(self, st: _State, head: str, param: object, kids: tuple) -> int:
        """The node ``head(param; kids)``, created (with its clauses) if new."""
        key = (head, param, kids)
        found = st.table.get(key)
        if found is not None:
            return found
        if head == "var":
            term = z3.Const(f"v_{param}", self.sort)
        else:
            term = self._fn(head, param)(*(st.terms[k] for k in kids))
            self.solver.add(
                z3.Implies(
                    self.reach(term),
                    z3.And([self.reach(st.terms[k]) for k in kids]),
                )
            )
        st.terms.append(term)
        st.keys.append(key)
        st.table[key] = len(st.terms) - 1
        return len(st.terms) - 1

    def _encode(self, st: _State, e: Expr) -> int:
        h = e.head
        if h == "var":
            return self._node(st, "var", e.param, ())
        if h == "sum":
            out = self._encode(st, e.args[0])
            for p in prime_factors(e.param):
                out = self._node(st, "sum", p, (out,))
            return out
        if h == "concat":
            raise ValueError("split piecewise (concat) terms before encoding them")
        kids = tuple(self._encode(st, a) for a in e.args)
        return self._node(st, h, None, kids)

    # --- one round of instantiation ---------------------------------------------

    def _classes(self, st: _State, model: z3.ModelRef) -> list[int]:
        values: dict[int, int] = {}
        out = []
        for t in st.terms:
            v = model.eval(t, model_completion=True).get_id()
            out.append(values.setdefault(v, len(values)))
        return out

    def _round(self, st: _State, cls: list[int]) -> bool:
        """Assert every new axiom instance; True if anything changed."""
        members: dict[int, list[int]] = {}
        for n, c in enumerate(cls):
            members.setdefault(c, []).append(n)
        by_head: dict[str, list[int]] = {}
        canon: dict[Key, int] = {}
        for n, (head, param, kids) in enumerate(st.keys):
            by_head.setdefault(head, []).append(n)
            canon.setdefault((head, param, tuple(cls[k] for k in kids)), n)
        changed = False
        fresh = len(members)
        node_class = list(cls)

        def build(pat: Pattern, sub: dict) -> int:
            nonlocal changed, fresh
            if isinstance(pat, str):
                return sub[pat]
            head, param, args = pat
            if isinstance(param, str):
                param = sub[param]
            kid_classes = tuple(build(a, sub) for a in args)
            key = (head, param, kid_classes)
            if key in canon:
                return node_class[canon[key]]
            kids = tuple(members[c][0] for c in kid_classes)
            n = self._node(st, head, param, kids)
            if n < len(node_class):
                return node_class[n]
            changed = True
            node_class.append(fresh)
            members[fresh] = [n]
            canon[key] = n
            fresh += 1
            return fresh - 1

        for lhs, rhs in RULES:
            for n in by_head.get(lhs[0], ()):
                for sub in self._match(lhs, n, {}, st, cls, members):
                    c = build(rhs, sub)
                    if c != cls[n]:
                        other = members[c][0]
                        self.solver.add(st.terms[n] == st.terms[other])
                        changed = True
        return changed

    def _match(
        self,
        pat: tuple,
        n: int,
        sub: dict,
        st: _State,
        cls: list[int],
        members: dict[int, list[int]],
    ) -> Iterator[dict]:
        """Substitutions under which node ``n`` matches ``pat`` (classes bound)."""
        head, param, args = pat
        h, p, kids = st.keys[n]
        if h != head:
            return
        if isinstance(param, str):
            if param in sub and sub[param] != p:
                return
            sub = {**sub, param: p}
        elif param is not None and param != p:
            return
        yield from self._match_args(args, kids, sub, st, cls, members)

    def _match_args(self, args, kids, sub, st, cls, members) -> Iterator[dict]:
        if not args:
            yield sub
            return
        pat, c = args[0], cls[kids[0]]
        if isinstance(pat, str):
            if pat in sub and sub[pat] != c:
                return
            options: Iterator[dict] = iter([{**sub, pat: c}])
        else:
            options = (
                s
                for m in members[c]
                for s in self._match(pat, m, sub, st, cls, members)
            )
        for s in options:
            yield from self._match_args(args[1:], kids[1:], s, st, cls, members)

    def _close(self, st: _State, goal: z3.BoolRef | None) -> Closure | bool:
        """Instantiate until closed or bounded; True once ``goal`` is proved."""
        rounds = 0
        while True:
            assumptions = [z3.Not(goal)] if goal is not None else []
            if self.solver.check(*assumptions) == z3.unsat:
                return True
            if rounds >= self.max_rounds or len(st.terms) > self.max_nodes:
                return Closure(False, rounds, len(st.terms))
            cls = self._classes(st, self.solver.model())
            rounds += 1
            if not self._round(st, cls):
                return Closure(True, rounds, len(st.terms))

    # --- queries -----------------------------------------------------------------

    def decide(self, e: Expr) -> bool | None:
        """``e ⊑`` some target: True, False (exact), or None (a bound was hit)."""
        st = self._state.copy()
        self.solver.push()
        try:
            q = self._encode(st, e)
            run = self._close(st, self.reach(st.terms[q]))
            if run is True:
                return True
            assert isinstance(run, Closure)
            return False if run.closed and self.targets.closed else None
        finally:
            self.solver.pop()
