"""The two services the search relies on, behind one narrow interface each.

- :class:`Pruner` gives every tensor an abstract expression
  (:func:`mirage_xdsl.search.pruning.abstract_expr.op_expr`) and asks whether it is a
  subexpression of the target's (:class:`~mirage_xdsl.search.pruning.subexpr_oracle.SubexprOracle`);
  it memoises both, because the generator asks the same questions again and
  again from different prefixes.
- :func:`check_equivalent` runs the probabilistic finite-field verifier
  (:func:`mirage_xdsl.verify.equivalence.equivalent`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.search.pruning import abstract_expr
from mirage_xdsl.search.pruning.subexpr_oracle import SubexprOracle
from mirage_xdsl.semantics.interpreter import run
from mirage_xdsl.verify import equivalence as verifier

Expr = Any
"""An abstract expression (opaque to the search; hashable)."""


class Pruner:
    """Abstract expressions of tensors and the subexpression test, memoised."""

    def __init__(self, function: Any, outputs: Sequence[Any], enabled: bool = True):
        self.enabled = enabled
        self.exprs: Mapping[Any, Expr] = abstract_expr.exprs_of_function(function)
        targets = [self.exprs.get(v) for v in outputs]
        self.targets = targets
        self._oracle = SubexprOracle(targets)
        self._expr_cache: dict[tuple, Expr] = {}
        self._subexpr_cache: dict[Expr, bool] = {}
        self.queries = 0
        self.errors = 0
        """Queries the oracle could not answer (kept, as pruning must be sound)."""

    def arg_expr(self, value: Any) -> Expr:
        return self.exprs.get(value)

    def op_expr(
        self,
        kind: str,
        operands: Sequence[Expr],
        operand_shapes: Sequence[tuple[int, ...]],
        attrs: Mapping[str, object],
    ) -> Expr:
        key = (kind, tuple(operands), tuple(operand_shapes), tuple(attrs.items()))
        cached = self._expr_cache.get(key)
        if cached is None:
            cached = abstract_expr.op_expr(kind, operands, operand_shapes, attrs)
            self._expr_cache[key] = cached
        return cached

    def keep(self, expr: Expr) -> bool:
        """Whether a tensor with this expression may appear in a solution."""
        if not self.enabled or expr is None:
            return True
        hit = self._subexpr_cache.get(expr)
        if hit is None:
            self.queries += 1
            try:
                hit = bool(self._oracle.is_subexpr(expr))  # type: ignore[union-attr]
            except ValueError:
                self.errors += 1
                hit = True  # undecidable here: keep, pruning must stay sound
            self._subexpr_cache[expr] = hit
        return hit


@dataclass(frozen=True)
class Check:
    """The outcome of checking one candidate against the input program."""

    equivalent: bool
    method: str
    detail: str = ""


def float_outputs(module: ModuleOp, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return run(module, inputs)


def close(outs: Sequence[np.ndarray], refs: Sequence[np.ndarray]) -> bool:
    """Relative L2 agreement of every output, as ``mirage-run --compare``."""
    if [o.shape for o in outs] != [r.shape for r in refs]:
        return False
    for o, r in zip(outs, refs, strict=True):
        scale = max(float(np.linalg.norm(r)), 1e-30)
        if not float(np.linalg.norm(o - r)) / scale < 1e-3:
            return False
    return True


def check_equivalent(
    candidate: ModuleOp, program: ModuleOp, trials: int, seed: int = 0
) -> Check:
    """The verifier's verdict on a complete candidate."""
    verdict = verifier.equivalent(candidate, program, trials=trials or None, seed=seed)
    return Check(
        bool(verdict.equivalent),
        "finite-field",
        f"{verdict.trials} trials, false-positive bound "
        f"{verdict.false_positive_bound:.3g}",
    )
