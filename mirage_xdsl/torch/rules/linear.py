"""Matrix products: ``matmul``/``mm``/``bmm`` and ``nn.Linear``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import fx

from mirage_xdsl.dialects import shapes
from mirage_xdsl.torch.nodes import (
    node_shape,
    unsupported,
)
from mirage_xdsl.torch.rules.operands import (
    Converter,
    Value,
    check_shape,
    parameter_of,
    refuse_scalars,
    tensor_operands,
)


def _batched(weight: torch.Tensor, batch: Sequence[int]) -> torch.Tensor:
    """``weight`` repeated over the batch dims of the operand it multiplies.

    The dialect's matmul wants equal batch dims on both sides; a weight shared
    by every batch entry is therefore passed once per entry.
    """
    return weight.expand(*batch, *weight.shape[-2:]).contiguous()


def matmul(c: Converter, node: fx.Node, a: Any, b: Any) -> Value:
    """``a @ b``; a 2-d parameter against a batched operand is batched at capture."""
    refuse_scalars(node, a, b)
    sa, sb = node_shape(a), node_shape(b)
    if len(sb) == 2 and len(sa) > 2 and (w := parameter_of(c, b)) is not None:
        return c.graph.matmul(c.value(a), c.constant(_batched(w, sa[:-2])))
    if len(sa) == 2 and len(sb) > 2 and (w := parameter_of(c, a)) is not None:
        return c.graph.matmul(c.constant(_batched(w, sb[:-2])), c.value(b))
    check_shape(node, shapes.matmul, sa, sb)
    return c.graph.matmul(c.value(a), c.value(b))


def linear(c: Converter, node: fx.Node, x: Any, w: Any, b: Any = None) -> Value:
    """``F.linear`` / ``nn.Linear``: ``x @ W.T + b``, with the ``[out, in]``
    weight transposed (and the bias shaped to broadcast) once, at capture."""
    weight = parameter_of(c, w)
    if weight is None:
        raise unsupported(
            node,
            "a weight that is not a module parameter or buffer (the rule "
            "transposes the weight, and repeats it over the batch dims, at capture)",
        )
    (value,) = tensor_operands(c, node, x)
    batch = node_shape(x)[:-2]
    y = c.graph.matmul(value, c.constant(_batched(weight.t(), batch)))
    if b is None:
        return y
    bias = parameter_of(c, b)
    if bias is None:
        raise unsupported(node, "a bias that is not a module parameter or buffer")
    rank = len(node_shape(node))
    return c.graph.add(y, c.constant(bias.reshape((1,) * (rank - 1) + (-1,))))
