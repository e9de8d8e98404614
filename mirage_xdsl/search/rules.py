"""What the generator may build: one rule per op ``KIND``.

Each rule takes the operands' :class:`Tensor` records and returns the result's
labels, or None when the op makes no sense there. Rules look at labels (which
axis each dimension is), phases (for-loop structure) and *partial* tokens (the
axes a tensor is only partly summed over, because a grid dimension or the
for-loop split them). They encode linearity: a partial sum may be scaled,
added to a partial sum over the same split or accumulated, but never fed to a
non-linear op, since exp(a + b) is not exp(a) + exp(b). The verifier has the
last word on every candidate; these rules only keep the generator from
building what cannot be right.

Part maxima (``labels.shift``) follow the online softmax: a row maximum
taken over a block's share of a split axis, or over one for-loop iteration,
is a *shift*; ``exp(x - m)`` and the sums of it stay relative to it (they
carry its token), and only an accumulation weighted by that same shift
(``forloop_accum`` with ``shift``) makes them the row's values again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mirage_xdsl.dialects.tensor_ops import (
    BINARY_KINDS,
    REDUCE_KINDS,
    SCALAR_KINDS,
    UNARY_KINDS,
)
from mirage_xdsl.ops import OPS, Form, kinds
from mirage_xdsl.search import labels as L
from mirage_xdsl.search.adapters import Expr

INVARIANT, LOOP, POST = 0, 1, 2

Labels = tuple[L.Label, ...]


@dataclass(frozen=True)
class Tensor:
    """What the generator knows about one tensor (kernel or block level)."""

    shape: tuple[int, ...]
    labels: Labels
    expr: Expr
    phase: int = INVARIANT
    partial: frozenset[L.Label] = frozenset()
    producer: int = -1
    """Position of the op that made it (-1: an input)."""


@dataclass(frozen=True)
class Scope:
    """Where ops are being generated: the grid and loop of a block graph.

    At the kernel level ``grid`` is empty and ``loop`` is None.
    """

    grid: tuple[L.Label, ...] = ()
    loop: L.Label | None = None
    full: frozenset[L.Label] = frozenset()
    """Axes whose tiles are whole (not split by the grid or the loop)."""
    reduced: frozenset[L.Label] = frozenset()
    """Axes the target program sums over: the only ones worth summing here."""
    maxed: frozenset[L.Label] = frozenset()
    """Axes the target program takes a row maximum over (``Axes.maxed``)."""


Rule = Callable[[Scope, list[Tensor], dict], tuple[Labels, frozenset] | None]


def _phase(ts: list[Tensor]) -> int | None:
    phases = {t.phase for t in ts}
    if {LOOP, POST} <= phases:
        return None
    return max(phases)


def _shifted(partial: frozenset) -> bool:
    """Whether a partial set holds only shift tokens (a value relative to
    part maxima, not a partial sum)."""
    return bool(partial) and all(L.is_shift(t) for t in partial)


def _nonlinear(scope: Scope, ts: list[Tensor], attrs: dict):
    (x,) = ts
    if x.partial:
        return None
    return x.labels, frozenset()


def _exp(scope: Scope, ts: list[Tensor], attrs: dict):
    """exp(x - m) = exp(x) exp(-m): a value relative to part maxima stays
    relative to them; a partial sum may not be exponentiated."""
    (x,) = ts
    if x.partial and not _shifted(x.partial):
        return None
    return x.labels, x.partial


def _linear(scope: Scope, ts: list[Tensor], attrs: dict):
    """A linear one-operand op (``linear`` in the op table: mul_scalar, neg):
    scaling by a constant (-1 for neg) commutes with sums, c (a + b) = c a +
    c b, so a partial sum may be scaled and stays a partial sum."""
    (x,) = ts
    return x.labels, x.partial


def _rms_norm(scope: Scope, ts: list[Tensor], attrs: dict):
    (x,) = ts
    last = x.labels[-1] if x.labels else L.UNIT
    if x.partial or not L.is_axis(last) or last not in scope.full:
        return None
    return x.labels, frozenset()


def _indexes(t: Tensor, tokens: frozenset) -> bool:
    return bool(tokens & set(t.labels))


def _add(scope: Scope, ts: list[Tensor], attrs: dict):
    """Partial sums over the same split add up; a whole value plus a part
    maximum (``x - m``, the exponent of the online softmax) is relative to it."""
    a, b = ts
    out = L.broadcast(a.labels, b.labels)
    if out is None:
        return None
    if a.partial != b.partial:
        lone = a.partial or b.partial
        if (a.partial and b.partial) or not _shifted(lone):
            return None
        return out, lone
    return out, a.partial


def _scale(scope: Scope, ts: list[Tensor], attrs: dict, divide: bool = False):
    """mul/div: linear in one operand; the other may not be partial."""
    a, b = ts
    out = L.broadcast(a.labels, b.labels)
    if out is None:
        return None
    if divide:
        if b.partial or _indexes(b, a.partial):
            return None
        return out, a.partial
    if a.partial and b.partial:
        return None
    if _indexes(b, a.partial) or _indexes(a, b.partial):
        return None
    return out, a.partial | b.partial


def _matmul(scope: Scope, ts: list[Tensor], attrs: dict):
    a, b = ts
    out = L.matmul(a.labels, b.labels)
    if out is None or (a.partial and b.partial):
        return None
    if _indexes(b, a.partial) or _indexes(a, b.partial):
        return None
    contracted = a.labels[-1]
    partial = a.partial | b.partial
    if contracted in scope.grid or contracted == scope.loop:
        partial = partial | {contracted}
    return out, frozenset(partial)


def _reduce_sum(scope: Scope, ts: list[Tensor], attrs: dict):
    (x,) = ts
    d = attrs["dim"]
    label = x.labels[d]
    partial = set(x.partial)
    if label[0] == "s" and label[2] == L.UNIT:
        token = L.part_token(label[1])
        if L.shift(token) in partial:
            return None  # each part is relative to its own maximum
        partial.discard(token)  # adding up side-by-side parts
    elif label not in scope.reduced:
        return None
    out = tuple(L.UNIT if i == d else lab for i, lab in enumerate(x.labels))
    if label in scope.grid or label == scope.loop:
        partial.add(label)
    return out, frozenset(partial)


def _reduce_max(scope: Scope, ts: list[Tensor], attrs: dict):
    """A row maximum is no linear function: its row must be whole, not a
    partial sum, and along an axis the program takes its maximum over (as
    sums go only along axes it sums over). Over a row the grid or the
    for-loop cuts, a block's maximum of its part is a *part maximum*, a
    shift for the online softmax (it carries ``shift(axis)``). A loop its
    grid shares has no shift: the maximum over a block's iterations cannot
    be written out."""
    (x,) = ts
    d = attrs["dim"]
    label = x.labels[d]
    if x.partial or label not in scope.maxed:
        return None
    out = tuple(L.UNIT if i == d else lab for i, lab in enumerate(x.labels))
    if label in scope.grid or label == scope.loop:
        if label == scope.loop and label in scope.grid:
            return None
        return out, frozenset({L.shift(label)})
    return out, frozenset()


def _concat(scope: Scope, ts: list[Tensor], attrs: dict):
    a, b = ts
    d = attrs["dim"]
    if len(a.labels) != len(b.labels) or a.partial or b.partial:
        return None
    if a.labels[d] not in scope.reduced or b.labels[d] not in scope.reduced:
        return None  # concatenation pays only to merge two contractions
    if any(
        x != y
        for i, (x, y) in enumerate(zip(a.labels, b.labels, strict=True))
        if i != d
    ):
        return None
    if a.labels[d] == b.labels[d]:
        return None
    out = list(a.labels)
    out[d] = ("c", a.labels[d], b.labels[d])
    return tuple(out), a.partial


def _shift_of(scope: Scope, x: Tensor, m: Tensor) -> bool:
    """Whether ``m`` is the part maximum ``x`` is relative to in this loop:
    one value per row of ``x``, from the same iteration."""
    loop = scope.loop
    return (
        loop is not None
        and loop not in scope.grid
        and m.phase == LOOP
        and m.partial == {L.shift(loop)}
        and L.shift(loop) in x.partial
        and m.labels == (*x.labels[:-1], L.UNIT)
    )


def _accum(scope: Scope, ts: list[Tensor], attrs: dict):
    """forloop_accum: sums iterations, so it must finish a sum over the loop.

    When the grid splits the loop's axis too (split-K: each block walks its
    own share), the loop finishes only the block's share: the sum stays
    partial over the grid's split, for a later kernel to add up. ``rms`` and
    ``mean`` cannot be finished from shares, so they need the whole axis.
    A value relative to each iteration's part maximum is accumulated with
    that maximum as its shift (``none`` and ``sum``), and only so."""
    x = ts[0]
    loop = scope.loop
    if loop is None or x.phase != LOOP:
        return None
    reduction = attrs["reduction"]
    partial = set(x.partial)
    if len(ts) > 1:
        if reduction not in SHIFTABLE or not _shift_of(scope, x, ts[1]):
            return None
        partial.discard(L.shift(loop))
    elif L.shift(loop) in partial:
        return None
    shared = loop in scope.grid
    if reduction == "none":
        if loop not in partial or loop in x.labels:
            return None
        if not shared:
            partial.discard(loop)
        return x.labels, frozenset(partial)
    last = x.labels[-1]
    if loop in x.labels[:-1]:
        return None
    if reduction == "sum":
        if loop not in partial and last != loop:
            return None
    elif loop in partial or last != loop or x.partial or shared:
        return None
    if shared:
        partial.add(loop)
    else:
        partial.discard(loop)
    return (*x.labels[:-1], L.UNIT), frozenset(partial)


RULES: dict[str, Rule] = {
    **{
        kind: _linear if OPS[kind].linear else _nonlinear
        for kind in kinds(Form.UNARY, Form.SCALAR)
    },
    "exp": _exp,
    "add": _add,
    "mul": _scale,
    "div": lambda s, ts, a: _scale(s, ts, a, divide=True),
    "rms_norm": _rms_norm,
    "matmul": _matmul,
    "reduce_sum": _reduce_sum,
    "reduce_max": _reduce_max,
    "concat": _concat,
    "forloop_accum": _accum,
}
"""The rule of each op ``KIND``. A one-operand element-wise op (with or
without a constant) passes a partial sum through only if the op table calls
it ``linear``; the two-operand ones are each linear in their own way."""

UNARY = UNARY_KINDS
SCALAR = SCALAR_KINDS
"""Element-wise ops with a constant; the generator takes their constants from
the target program (``labels.Axes.constants``)."""


def unary_specs(constants: tuple) -> list[tuple[str, tuple]]:
    """Every one-operand op the generator tries: the plain unary kinds, then the
    target's constant-carrying ops (``mul_scalar`` by each of its constants,
    ``rms_norm`` with each of its epsilons)."""
    return [(kind, ()) for kind in UNARY] + list(constants)


COMMUTATIVE = ("add", "mul")
ACCUM_REDUCTIONS = ("none", "sum", "mean", "rms")
SHIFTABLE = ("none", "sum")
"""The accumulations a shift may weight (``block.SHIFTABLE_REDUCTIONS``)."""

KERNEL_KINDS = (*UNARY, *BINARY_KINDS, "matmul", *REDUCE_KINDS)
BLOCK_KINDS = (*KERNEL_KINDS, "concat", "forloop_accum")


def apply(
    scope: Scope, kind: str, ts: list[Tensor], attrs: dict
) -> tuple[Labels, frozenset, int] | None:
    """Labels, partial tokens and phase of a new op's result, or None."""
    phase = _phase(ts)
    if phase is None:
        return None
    got = RULES[kind](scope, ts, attrs)
    if got is None:
        return None
    axes = [label for label in got[0] if L.is_axis(label)]
    if len(set(axes)) != len(axes):
        return None  # no value of the program pairs an axis with itself
    if kind == "forloop_accum":
        phase = POST
    return got[0], got[1], phase
