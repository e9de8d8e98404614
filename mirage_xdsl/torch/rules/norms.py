"""RMSNorm: ``F.rms_norm`` and the pieces of its written-out form
(``x^2``, ``mean``, ``sqrt``, ``rsqrt``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import fx

from mirage_xdsl.torch.nodes import (
    RMS_NORM_FORMS,
    last_dim_only,
    node_shape,
    unsupported,
)
from mirage_xdsl.torch.rules.arith import unary
from mirage_xdsl.torch.rules.operands import (
    Converter,
    Partial,
    Value,
    parameter_of,
    partial_of,
    tensor_operands,
)


def pow_(c: Converter, node: fx.Node, a: Any, exponent: Any) -> Value:
    if exponent != 2:
        raise unsupported(node, f"exponent {exponent!r} (only x^2 is supported)")
    return Partial("square", c.value(a), node)


def square(c: Converter, node: fx.Node, a: Any) -> Value:
    return Partial("square", c.value(a), node)


def mean(c: Converter, node: fx.Node, a: Any, dims: Any = None, keepdim=False, **kw):
    sq = partial_of(c, a, "square")
    if sq is None or not keepdim or not last_dim_only(node, dims, len(node_shape(a))):
        raise unsupported(node, f"mean is only supported inside {RMS_NORM_FORMS}")
    return Partial("mean_square", sq.x, node)


def sqrt(c: Converter, node: fx.Node, a: Any) -> Value:
    ms = partial_of(c, a, "mean_square")
    return Partial("rms", ms.x, node, ms.eps) if ms else unary("sqrt")(c, node, a)


def rsqrt(c: Converter, node: fx.Node, a: Any) -> Value:
    ms = partial_of(c, a, "mean_square")
    if ms is None:
        raise unsupported(node, f"rsqrt is only supported inside {RMS_NORM_FORMS}")
    return Partial("inv_rms", ms.x, node, ms.eps)


def rms_norm(
    c: Converter,
    node: fx.Node,
    a: Any,
    normalized_shape: Sequence[int],
    weight: Any = None,
    eps: Any = None,
) -> Value:
    """``F.rms_norm`` / ``nn.RMSNorm`` over the last dim, keeping ``eps``; when
    it is None torch takes the epsilon of the type it computes in (fp32 for
    f16, bf16 and f32). A weight other than all ones multiplies the result,
    broadcast over the rows."""
    if list(normalized_shape) != [node_shape(a)[-1]]:
        raise unsupported(node, "RMSNorm over more than the last dim")
    (x,) = tensor_operands(c, node, a)
    if eps is None:
        eps = torch.finfo(torch.float32).eps
    normed = c.graph.rms_norm(x, float(eps))
    if weight is None:
        return normed
    w = parameter_of(c, weight)
    if w is None:
        raise unsupported(node, "RMSNorm with a weight that is not a parameter")
    if bool(torch.all(w == 1)):
        return normed
    rank = len(node_shape(a))
    return c.graph.mul(normed, c.constant(w.reshape((1,) * (rank - 1) + (-1,))))
