"""Activations with no op of their own, written in the op table's ops.

Each is exact in real numbers (and so in the verifier's field, where
``relu`` is a keyed function): with ``p = relu(x)`` and ``n = relu(-x)``,
``|x| = p + n`` and ``leaky_relu(x) = p - a n``; ``elu`` (and ``selu``,
``celu``) is ``p + alpha (exp(-s n) - 1)``, scaled; ``hardsigmoid`` is
``clamp(x + 3, 0, 6) / 6`` and ``hardswish`` ``x`` times it; ``mish`` is ``x
tanh(softplus(x))`` and ``logsigmoid`` ``-softplus(-x)``. The floats differ
from torch's by a rounding or two (``n`` scaled where torch scales ``x``,
``/ 6`` as a product by ``1/6``).
"""

from __future__ import annotations

import math
from typing import Any

from torch import fx
from xdsl.ir import SSAValue

from mirage_xdsl.torch.nodes import node_shape
from mirage_xdsl.torch.rules.operands import Converter, Value, tensor_operands

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
"""torch's SELU constants."""


def _parts(c: Converter, node: fx.Node, a: Any) -> tuple[SSAValue, SSAValue]:
    """``relu(x)`` and ``relu(-x)``."""
    (x,) = tensor_operands(c, node, a)
    return c.graph.relu(x), c.graph.relu(c.graph.neg(x))


def abs_(c: Converter, node: fx.Node, a: Any) -> Value:
    positive, negative = _parts(c, node, a)
    return c.graph.add(positive, negative)


def leaky_relu(c: Converter, node: fx.Node, a: Any, slope: float = 0.01) -> Value:
    positive, negative = _parts(c, node, a)
    return c.graph.add(positive, c.graph.mul_scalar(negative, -float(slope)))


def elu(
    c: Converter,
    node: fx.Node,
    a: Any,
    alpha: float = 1.0,
    scale: float = 1.0,
    input_scale: float = 1.0,
) -> Value:
    """``scale (x if x > 0 else alpha (exp(input_scale x) - 1))``."""
    positive, negative = _parts(c, node, a)
    e = c.graph.exp(c.graph.mul_scalar(negative, -float(input_scale)))
    y = c.graph.add(
        positive, c.graph.mul_scalar(c.graph.add_scalar(e, -1.0), float(alpha))
    )
    return y if scale == 1 else c.graph.mul_scalar(y, float(scale))


def selu(c: Converter, node: fx.Node, a: Any) -> Value:
    return elu(c, node, a, SELU_ALPHA, SELU_SCALE)


def celu(c: Converter, node: fx.Node, a: Any, alpha: float = 1.0) -> Value:
    return elu(c, node, a, alpha, 1.0, 1.0 / float(alpha))


def _hardsigmoid(c: Converter, x: SSAValue) -> SSAValue:
    y = c.graph.clamp_max(c.graph.clamp_min(c.graph.add_scalar(x, 3.0), 0.0), 6.0)
    return c.graph.mul_scalar(y, 1.0 / 6.0)


def hardsigmoid(c: Converter, node: fx.Node, a: Any) -> Value:
    (x,) = tensor_operands(c, node, a)
    return _hardsigmoid(c, x)


def hardswish(c: Converter, node: fx.Node, a: Any) -> Value:
    (x,) = tensor_operands(c, node, a)
    return c.graph.mul(x, _hardsigmoid(c, x))


def mish(c: Converter, node: fx.Node, a: Any) -> Value:
    (x,) = tensor_operands(c, node, a)
    return c.graph.mul(x, c.graph.tanh(c.graph.softplus(x)))


def log_sigmoid(c: Converter, node: fx.Node, a: Any) -> Value:
    (x,) = tensor_operands(c, node, a)
    return c.graph.neg(c.graph.softplus(c.graph.neg(x)))


def exp2(c: Converter, node: fx.Node, a: Any) -> Value:
    (x,) = tensor_operands(c, node, a)
    return c.graph.exp(c.graph.mul_scalar(x, math.log(2.0)))


def glu(c: Converter, node: fx.Node, a: Any, dim: int = -1) -> Value:
    """``F.glu(x, dim)``: the first half times the sigmoid of the second."""
    shape = node_shape(a)
    d = dim % len(shape)
    half = shape[d] // 2
    (x,) = tensor_operands(c, node, a)
    first = c.graph.slice(x, d, 0, half)
    second = c.graph.slice(x, d, half, shape[d])
    return c.graph.mul(first, c.graph.sigmoid(second))
