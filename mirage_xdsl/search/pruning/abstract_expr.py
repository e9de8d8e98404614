"""Abstract expressions: what a tensor computes, with the index details dropped.

Mirage prunes its µGraph search with *abstract expressions* (see
``docs/abstract_expressions.md``). Every tensor gets a term over the inputs,
and a candidate prefix survives only if each of its tensors' terms is a
subexpression of the target's under the axioms
(``mirage_xdsl.search.pruning.subexpr_oracle``).

This module is the public face of the concept; the parts live in modules of
their own:

- ``expr_terms``: the terms (:class:`Expr`), their heads, constructors and text form;
- ``expr_piecewise``: concatenations (piecewise terms) and the ops pushed through them;
- ``op_exprs``: the table that gives each op ``KIND`` its term (:func:`op_expr`);
- ``program_exprs``: the walk that labels every value of a program
  (:func:`exprs_of_function`).
"""

from __future__ import annotations

from mirage_xdsl.search.pruning.expr_piecewise import (
    boundaries,
    concat_op,
    matmul,
    pointwise,
    reduce,
    reduce_max,
    slice_expr,
)
from mirage_xdsl.search.pruning.expr_terms import (
    BINARY_HEADS,
    BUILT_HEADS,
    HEADS,
    UNARY_HEADS,
    Expr,
    Shape,
    add,
    concat,
    constant,
    div,
    exp,
    marks,
    mul,
    pieces,
    silu,
    sqrt,
    sum_,
    unary_head,
    var,
)
from mirage_xdsl.search.pruning.op_exprs import (
    ABSTRACT_EXPRS,
    TERMS,
    ExprRule,
    forloop_accum,
    op_expr,
    rms_norm,
)
from mirage_xdsl.search.pruning.program_exprs import exprs_of_function, output_exprs

_boundaries = boundaries
"""The name ``subexpr_oracle`` imports the piece boundaries under."""

__all__ = [
    "ABSTRACT_EXPRS",
    "BINARY_HEADS",
    "BUILT_HEADS",
    "HEADS",
    "TERMS",
    "UNARY_HEADS",
    "Expr",
    "ExprRule",
    "Shape",
    "add",
    "boundaries",
    "concat",
    "concat_op",
    "constant",
    "div",
    "exp",
    "exprs_of_function",
    "forloop_accum",
    "marks",
    "matmul",
    "mul",
    "op_expr",
    "output_exprs",
    "pieces",
    "pointwise",
    "reduce",
    "reduce_max",
    "rms_norm",
    "silu",
    "slice_expr",
    "sqrt",
    "sum_",
    "unary_head",
    "var",
]
