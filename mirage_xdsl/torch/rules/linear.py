"""Matrix products: ``matmul``/``mm``/``bmm``, ``addmm``/``baddbmm`` and
``nn.Linear``."""

from __future__ import annotations

from typing import Any

from torch import fx

from mirage_xdsl.dialects import shapes
from mirage_xdsl.torch.nodes import (
    node_shape,
    unsupported,
)
from mirage_xdsl.torch.rules.operands import (
    Converter,
    Value,
    as_number,
    check_shape,
    refuse_scalars,
    tensor_operands,
)
from mirage_xdsl.torch.rules.siblings import fused_part


def matmul(c: Converter, node: fx.Node, a: Any, b: Any) -> Value:
    """``a @ b``: ``kernel.matmul``, whose batch dims broadcast, so a batched
    input times one 2-d weight reads the weight once."""
    refuse_scalars(node, a, b)
    check_shape(node, shapes.matmul, node_shape(a), node_shape(b))
    return c.graph.matmul(c.value(a), c.value(b))


def linear(c: Converter, node: fx.Node, x: Any, w: Any, b: Any = None) -> Value:
    """``F.linear`` / ``nn.Linear``: ``x @ W.T + b``. The weight stays as
    ``nn.Linear`` stores it (``[out, in]``: each output's inputs contiguous,
    which the skinny products of a decode step read fastest), a parameter
    passed in as it is (:meth:`Converter.constant`), a graph input
    (``torch.compile`` lifts parameters) too, and the matmul reads it
    transposed (:meth:`Converter.transposed`, folded into the loads). Sibling
    linears of one input are one matmul, each a slice of it
    (:mod:`.siblings`)."""
    (value,) = tensor_operands(c, node, x)
    if len(node_shape(x)) < 2 or len(node_shape(w)) != 2:
        raise unsupported(node, "a linear of a 1-d input or with a weight not 2-d")
    part = fused_part(c, node)
    if part is not None:
        last = len(node_shape(x)) - 1
        return c.graph.slice(part.fused, last, part.start, part.end)
    y = c.graph.matmul(value, c.transposed(w))
    return y if b is None else c.graph.add(y, c.value(b))


def addmm(
    c: Converter, node: fx.Node, bias: Any, a: Any, b: Any, *, beta=1, alpha=1
) -> Value:
    """``torch.addmm(bias, a, b)`` (GPT-2's ``Conv1D``) and
    ``torch.baddbmm(bias, a, b)`` (BLOOM's ALiBi scores):
    ``beta * bias + alpha * (a @ b)``, the bias broadcast as in torch (and
    not read when ``beta`` is 0, as torch does not)."""
    if as_number(beta) is None or as_number(alpha) is None:
        raise unsupported(node, "beta and alpha that are not numbers")
    y = matmul(c, node, a, b)
    if alpha != 1:
        y = c.graph.mul_scalar(y, float(alpha))
    if beta == 0:
        return y
    if not isinstance(bias, fx.Node):
        raise unsupported(node, "a bias that is a number")
    check_shape(node, shapes.broadcast, node_shape(node), node_shape(bias))
    z = c.value(bias)
    if beta != 1:
        z = c.graph.mul_scalar(z, float(beta))
    return c.graph.add(y, z)
