"""Selection by a boolean mask: ``torch.where``, ``masked_fill``, the mask's
negation (``~m``, ``logical_not``), and masks made from module buffers.

A boolean tensor reaches a program as 0/1 in the compute dtype, so selecting
is arithmetic: ``where(m, a, b) = a m + b (1 - m)``, exact for finite ``a``
and ``b`` (each side is multiplied by 0 or 1 and the other side adds 0) and
exact in the verifier's finite field. An infinite fill is no product
(``inf * 0`` is not 0): a fill of ``-inf`` is kept as :class:`MaskedScores`,
which a softmax reads as 0/1 weights of its exponentials, and refused
anywhere else; the finite fills models use (``torch.finfo(dtype).min``) are
kept as they are. ``~m`` is ``1 - m``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import fx
from xdsl.ir import SSAValue

from mirage_xdsl.dialects import shapes
from mirage_xdsl.torch.nodes import node_meta, node_shape, unsupported
from mirage_xdsl.torch.rules.operands import (
    Converter,
    MaskedScores,
    Parameter,
    Value,
    as_number,
    check_shape,
    parameter_of,
)


def where(c: Converter, node: fx.Node, cond: Any, a: Any, b: Any) -> Value:
    """``torch.where(cond, a, b)``: ``a m + b (1 - m)``, ``a`` and ``b``
    tensors or finite numbers; with one of them ``-inf`` and the other a
    tensor, the scores a softmax masks (:class:`MaskedScores`)."""
    m = _mask(c, node, cond)
    for kept, fill, where_true in ((a, b, True), (b, a, False)):
        if as_number(fill) == -math.inf and isinstance(kept, fx.Node):
            mask_shape = tuple(m.type.get_shape())  # type: ignore[attr-defined]
            check_shape(node, shapes.broadcast, node_shape(kept), mask_shape)
            keep = m if where_true else _not(c, m)
            return MaskedScores(c.value(kept), keep, node)
    terms = [_times(c, node, a, m)]
    if as_number(b) != 0:  # a 0 adds nothing, and needs no 1 - m
        terms.append(_times(c, node, b, _not(c, m)))
    terms = [t for t in terms if t is not None]
    if not terms:
        return c.graph.mul_scalar(m, 0.0)
    return terms[0] if len(terms) == 1 else c.graph.add(*terms)


def masked_fill(c: Converter, node: fx.Node, x: Any, mask: Any, value: Any) -> Value:
    """``x.masked_fill(mask, v)``: ``where(mask, v, x)``."""
    return where(c, node, mask, value, x)


def logical_not(c: Converter, node: fx.Node, a: Any) -> Value:
    """``~m`` / ``logical_not(m)`` of a boolean mask: ``1 - m``."""
    return _not(c, _mask(c, node, a))


def _mask(c: Converter, node: fx.Node, cond: Any) -> SSAValue:
    if not isinstance(cond, fx.Node) or node_meta(cond).dtype != torch.bool:
        raise unsupported(node, "a selection by a condition that is not a boolean mask")
    return c.value(cond)


def _not(c: Converter, m: SSAValue) -> SSAValue:
    return c.graph.add_scalar(c.graph.neg(m), 1.0)


def _times(c: Converter, node: fx.Node, v: Any, m: SSAValue) -> SSAValue | None:
    """``v m``: a tensor times the mask, a number as the mask scaled by it
    (None for 0, which adds nothing)."""
    k = as_number(v)
    if k is not None:
        if not math.isfinite(k):
            raise unsupported(
                node, f"a fill of {k} (a 0/1 mask can select finite values only)"
            )
        return c.graph.mul_scalar(m, k) if k else None
    if not isinstance(v, fx.Node):
        raise unsupported(node, f"a selected value {v!r}")
    mask_shape = tuple(m.type.get_shape())  # type: ignore[attr-defined]
    check_shape(node, shapes.broadcast, node_shape(v), mask_shape)
    return c.graph.mul(c.value(v), m)


def compare(c: Converter, node: fx.Node, a: Any, b: Any) -> Value:
    """A comparison of module buffers and numbers (nanoGPT's causal mask,
    ``self.bias[:, :, :T, :T] == 0``), made at capture: a boolean mask the
    program reads as 0/1. A comparison of computed tensors has no
    kernel-dialect form."""
    operands = []
    for x in (a, b):
        tensor = parameter_of(c, x) if isinstance(x, fx.Node) else x
        if isinstance(x, fx.Node) and tensor is None:
            raise unsupported(
                node, "a comparison of computed tensors (only of module buffers)"
            )
        operands.append(tensor)
    return Parameter(node.target(*operands), node)
