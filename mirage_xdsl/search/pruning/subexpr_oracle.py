"""The pruning oracle: is a term a subexpression of a target under the axioms?

Queries go, in order, to a cache keyed by the term's normal form, to the
normal-form decision procedure (:mod:`mirage_xdsl.search.pruning.normal_form`),
and only if that cannot decide, to equality saturation on an e-graph
(:mod:`mirage_xdsl.search.pruning.subexpr_egraph`), which decides whenever
saturation finishes within its bounds. Whatever stays undecided counts as a
subexpression: pruning must never drop a correct candidate, so the oracle
errs only towards keeping.

The e-graph is the fallback because it decided every query of the benchmark
corpus, as the ground z3 procedure
(:mod:`mirage_xdsl.search.pruning.subexpr_z3`) did, in about a millisecond
where z3 took hundreds (``docs/abstract_expressions.md``, "Measured"). The
quantified z3 theory (:mod:`mirage_xdsl.search.pruning.axioms`) stays
available as :meth:`SubexprOracle.z3_is_subexpr`, an independent prover for
tests.

A piecewise (concat) term is a subexpression iff each of its pieces is:
every element of the concatenation is an element of one piece.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from mirage_xdsl.search.pruning import normal_form as nf
from mirage_xdsl.search.pruning.abstract_expr import (
    Expr,
    _boundaries,
    marks,
    pieces,
    slice_expr,
)


@dataclass
class OracleStats:
    queries: int = 0
    cache_hits: int = 0
    fast_decided: int = 0
    fallback_decided: int = 0
    undecided: int = 0
    fallback_seconds: float = 0.0
    z3_seconds: float = 0.0
    verdicts: dict[str, int] = field(default_factory=lambda: {"yes": 0, "no": 0})

    @property
    def hit_rate(self) -> float:
        return self.cache_hits / self.queries if self.queries else 0.0


class SubexprOracle:
    """Answers ``is_subexpr`` against fixed targets, and ``equivalent``.

    ``use_fallback=False`` keeps what the normal forms leave undecided
    without asking the e-graph; ``max_nodes`` bounds its saturation;
    ``z3_timeout_ms`` bounds each call of the quantified z3 prover
    (:meth:`z3_is_subexpr`, not part of the decision).
    """

    def __init__(
        self,
        targets: Sequence[Expr],
        *,
        use_fallback: bool = True,
        max_nodes: int = 100_000,
        z3_timeout_ms: int = 1000,
    ):
        self.targets = [p for t in targets for p in pieces(t)]
        self.target_nfs = [nf.normal_form(t) for t in self.targets]
        self.target_atoms = frozenset().union(*(nf.atoms(t) for t in self.target_nfs))
        self.target_marks = frozenset().union(*(marks(t) for t in self.targets))
        self.use_fallback = use_fallback
        self.max_nodes = max_nodes
        self.z3_timeout_ms = z3_timeout_ms
        self._egraph = None
        self._z3 = None
        self._cache: dict[tuple, bool] = {}
        self.stats = OracleStats()

    # --- the decision ----------------------------------------------------------

    def fast_is_subexpr(self, e: Expr) -> bool | None:
        """The normal-form answer for one non-piecewise term (None: unknown)."""
        form = nf.normal_form(e)
        if not nf.atoms(form) <= self.target_atoms:
            return False
        unknown = False
        for t in self.target_nfs:
            r = nf.subexpr(form, t)
            if r:
                return True
            unknown |= r is None
        return None if unknown else False

    def fallback_is_subexpr(self, e: Expr) -> bool | None:
        """The e-graph's answer for one non-piecewise term (None: a bound hit).

        The e-graph is built and saturated on the targets at the first call.
        Without the optional ``egglog`` package (``pip install
        mirage-xdsl[egraph]``) the answer is None: the term is kept, which
        costs search time but never a µGraph.
        """
        if importlib.util.find_spec("egglog") is None:
            return None
        from mirage_xdsl.search.pruning.subexpr_egraph import EGraphSubexpr

        start = time.perf_counter()
        try:
            if self._egraph is None:
                self._egraph = EGraphSubexpr(self.targets, max_nodes=self.max_nodes)
            return self._egraph.decide(e)
        finally:
            self.stats.fallback_seconds += time.perf_counter() - start

    def z3_is_subexpr(self, e: Expr, timeout_ms: int | None = None) -> bool | None:
        """The quantified z3 prover's answer (None: not proved in time).

        Not part of the decision: it proves but never refutes, so tests use it
        as an independent check of "yes" answers.
        """
        from mirage_xdsl.search.pruning.axioms import Z3Axioms

        if self._z3 is None:
            self._z3 = Z3Axioms(self.z3_timeout_ms)
        start = time.perf_counter()
        try:
            return self._z3.prove_subexpr(e, self.targets, timeout_ms)
        finally:
            self.stats.z3_seconds += time.perf_counter() - start

    def _piece(self, e: Expr) -> bool:
        try:
            key = nf.normal_form(e)
        except ValueError:
            # A concat nested under another op (e.g. summed) has no single
            # normal form. A mark no target has still rules it out
            # (``abstract_expr.marks``); otherwise it is undecided, and kept
            # (pruning stays sound).
            if not marks(e) <= self.target_marks:
                self.stats.fast_decided += 1
                self.stats.verdicts["no"] += 1
                return False
            self.stats.undecided += 1
            return True
        self.stats.queries += 1
        cached = self._cache.get(key)
        if cached is not None:
            self.stats.cache_hits += 1
            return cached
        verdict = self.fast_is_subexpr(e)
        if verdict is not None:
            self.stats.fast_decided += 1
        elif self.use_fallback:
            verdict = self.fallback_is_subexpr(e)
            if verdict is not None:
                self.stats.fallback_decided += 1
        if verdict is None:
            self.stats.undecided += 1
            verdict = True
        self.stats.verdicts["yes" if verdict else "no"] += 1
        self._cache[key] = verdict
        return verdict

    def is_subexpr(self, e: Expr) -> bool:
        """Is ``e`` a subexpression of some target? (undecided counts as yes)"""
        return all(self._piece(p) for p in pieces(e))

    def equivalent(self, a: Expr, b: Expr) -> bool:
        """Are ``a`` and ``b`` equal under the equivalence axioms?

        Normal forms are canonical, so this is exact; piecewise terms are
        compared piece by piece over the union of their boundaries.
        """
        return equivalent(a, b)


def equivalent(a: Expr, b: Expr) -> bool:
    for x, y in ((a, b), (b, a)):
        if x.head == "concat":
            dim, sizes = x.param
            points = set(_boundaries(x, dim)) | set(_boundaries(y, dim))
            cuts = [0, *sorted(points), sum(sizes)]
            return all(
                equivalent(slice_expr(a, dim, lo, hi), slice_expr(b, dim, lo, hi))
                for lo, hi in zip(cuts, cuts[1:], strict=False)
            )
    return nf.normal_form(a) == nf.normal_form(b)
