"""The abstract expression of each op ``KIND``: the table :data:`ABSTRACT_EXPRS`
and :func:`op_expr`.

A matmul ``A·B`` with contraction length 64 is ``sum(64, mul(A, B))``,
wherever its tiles come from. Element counts are dropped: a mean is the sum it
divides (``mean(x) -> sum(n, x)``) and ``rms_norm(x) = div(x, sqrt(sum(n,
mul(x, x))))``. Every op that creates a count drops it the same way, so a
program and its target agree on them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace

from mirage_xdsl.ops import OPS, Form, OpSpec, elementwise_kinds
from mirage_xdsl.search.pruning.expr_piecewise import (
    concat_op,
    matmul,
    pointwise,
    reduce,
    reduce_max,
    slice_expr,
    with_dim,
)
from mirage_xdsl.search.pruning.expr_terms import (
    Expr,
    Shape,
    add,
    constant,
    div,
    mul,
    sqrt,
    sum_,
)


def rms_norm(x: Expr, shape: Shape, eps: float = 0.0) -> Expr:
    """``x / sqrt(mean(x^2) + eps)`` over the last dim, with the ``1/n`` dropped
    (the same term the mean accumulator plus ``add_scalar`` gives)."""
    sq = pointwise(mul, [x, x], [shape, shape])
    norm_shape = with_dim(shape, -1, 1)
    mean = reduce(sq, shape, -1)
    if eps:
        mean = pointwise(lambda m: add(m, constant(eps)), [mean], [norm_shape])
    norm = pointwise(sqrt, [mean], [norm_shape])
    return pointwise(div, [x, norm], [shape, norm_shape])


def forloop_accum(
    x: Expr,
    shape: Shape,
    attrs: Mapping[str, object],
    shift: tuple[Expr, Shape] | None = None,
) -> Expr:
    """Accumulation over ``forloop`` iterations (see ``block.ACCUM_REDUCTIONS``).

    Adding a tile over F iterations is ``sum(F, x)`` whether or not the tile
    varies with the iteration. ``mean`` and ``rms`` divide by the number of
    elements they saw (dropped); a loop-invariant tile (``loop_invariant``)
    is seen once, so they then reduce only the tile's last dim.

    A ``shift`` ``m`` weights each term by ``exp(m - M)``, ``M`` the maximum
    of the shifts over the iterations. A part's maximum and the row's are one
    term (``max`` drops what it ranges over, as every reduction drops its
    count), so the weight is ``exp(0)``, one: the accumulation has the plain
    one's term, and an online softmax or a FlashDecoding combine over part
    maxima has the term of the safe softmax it computes. The shift is then
    no subterm of the result; it passes the subexpression test on its own
    (the terms it weights, ``exp(s - m)``, contain it).
    """
    del shift  # its weight is one in terms (above)
    reduction = str(attrs.get("reduction", "none"))
    forloop = int(attrs.get("forloop", 1))  # type: ignore[call-overload]
    invariant = bool(attrs.get("loop_invariant", False))

    def iterations(t: Expr, t_shape: Shape) -> Expr:
        # iterations add element by element: through a concatenation's
        # pieces, so that it stays at the top of the term
        return pointwise(lambda a: sum_(forloop, a), [t], [t_shape])

    if reduction == "none":
        return iterations(x, shape)
    if reduction == "rms":
        x = pointwise(mul, [x, x], [shape, shape])
    total = reduce(x, shape, -1)
    if not (invariant and reduction in ("mean", "rms")):
        total = iterations(total, with_dim(shape, -1, 1))
    if reduction == "rms":
        total = pointwise(sqrt, [total], [with_dim(shape, -1, 1)])
    return total


# --- the table keyed by op KIND --------------------------------------------------

ExprRule = Callable[[Sequence[Expr], Sequence[Shape], Mapping[str, object]], Expr]


TERMS = SimpleNamespace(add=add, mul=mul, div=div, const=constant)
"""The term builders an op table ``expr`` formula is written against
(``const(c)``: a constant as its own variable)."""


def _elementwise(spec: OpSpec) -> ExprRule:
    """An element-wise op's term, pushed through piecewise operands: its
    ``expr`` formula over :data:`TERMS` (after the operands, a scalar op's
    constant ``attrs["scalar"]``), else its head applied to the operands.
    A head drops its op's constant: ``clamp_max(x, 1)`` and ``clamp_max(x,
    2)`` read as one term, which only lets more candidates through the
    subexpression check (the verifier keys each bound apart)."""

    def rule(xs: Sequence[Expr], shapes: Sequence[Shape], attrs: Mapping) -> Expr:
        formula = spec.expr
        if formula is None:
            return pointwise(lambda *args: Expr(spec.kind, args), xs, shapes)
        c = (float(attrs["scalar"]),) if spec.form is Form.SCALAR else ()
        return pointwise(lambda *args: formula(TERMS, *args, *c), xs, shapes)

    return rule


def _dim(attrs: Mapping[str, object]) -> int:
    return int(attrs["dim"])  # type: ignore[call-overload]


ABSTRACT_EXPRS: dict[str, ExprRule] = {
    **{kind: _elementwise(OPS[kind]) for kind in elementwise_kinds()},
    "rms_norm": lambda xs, shapes, attrs: rms_norm(
        xs[0],
        shapes[0],
        float(attrs.get("eps", 0.0)),  # type: ignore[arg-type]
    ),
    "matmul": lambda xs, shapes, attrs: matmul(xs[0], xs[1], shapes[0], shapes[1]),
    "reduce_sum": lambda xs, shapes, attrs: reduce(xs[0], shapes[0], _dim(attrs)),
    "reduce_max": lambda xs, shapes, attrs: reduce_max(xs[0], shapes[0], _dim(attrs)),
    "concat": lambda xs, shapes, attrs: concat_op(
        xs[0], xs[1], shapes[0], shapes[1], _dim(attrs)
    ),
    "forloop_accum": lambda xs, shapes, attrs: forloop_accum(
        xs[0], shapes[0], attrs, (xs[1], shapes[1]) if len(xs) > 1 else None
    ),
    # Layout ops move elements and compute nothing: the term is kept. (The
    # search never sees them: it works on the segments between them.)
    "transpose": lambda xs, shapes, attrs: xs[0],
    "reshape": lambda xs, shapes, attrs: xs[0],
    "broadcast": lambda xs, shapes, attrs: xs[0],
    "cast": lambda xs, shapes, attrs: xs[0],
    "slice": lambda xs, shapes, attrs: slice_expr(
        xs[0], _dim(attrs) - len(shapes[0]), int(attrs["start"]), int(attrs["end"])
    ),
    # Partitioning is abstracted away: a tile has its tensor's term, and a
    # device tensor stitched from tiles has the tiles' term.
    "input": lambda xs, shapes, attrs: xs[0],
    "output": lambda xs, shapes, attrs: xs[0],
}
"""Op ``KIND`` -> its abstract expression from operand terms, shapes, attrs."""


def op_expr(
    kind: str,
    operands: Sequence[Expr],
    operand_shapes: Sequence[tuple[int, ...]],
    attrs: Mapping[str, object] | None = None,
) -> Expr:
    """The abstract expression of an op of ``kind`` (a ``KIND`` of tensor_ops).

    ``attrs`` carries ``dim`` for ``reduce_sum``/``reduce_max``/``concat``, ``scalar`` for
    ``mul_scalar``/``add_scalar``, ``eps`` (optional) for ``rms_norm``, and
    ``reduction``, ``forloop`` (and optionally ``loop_invariant``) for
    ``forloop_accum``. ``input``/``output`` are the block iterators.
    """
    rule = ABSTRACT_EXPRS.get(kind)
    if rule is None:
        raise KeyError(f"no abstract expression for op kind '{kind}'")
    shapes = [tuple(s) for s in operand_shapes]
    return rule(list(operands), shapes, attrs or {})
