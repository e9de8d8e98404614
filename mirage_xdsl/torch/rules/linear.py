"""Matrix products: ``matmul``/``mm``/``bmm`` and ``nn.Linear``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import fx
from xdsl.ir import SSAValue

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
    ranked,
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
    """``a @ b``; a 2-d parameter against a batched operand is batched at
    capture, any other 2-d right operand is met by the batched one's rows
    (:func:`rows_times`)."""
    refuse_scalars(node, a, b)
    sa, sb = node_shape(a), node_shape(b)
    if len(sb) == 2 and len(sa) > 2 and (w := parameter_of(c, b)) is not None:
        return c.graph.matmul(c.value(a), c.constant(_batched(w, sa[:-2])))
    if len(sa) == 2 and len(sb) > 2 and (w := parameter_of(c, a)) is not None:
        return c.graph.matmul(c.constant(_batched(w, sb[:-2])), c.value(b))
    if len(sb) == 2 and len(sa) > 2:
        check_shape(node, shapes.matmul, (sa[-2], sa[-1]), sb)
        return rows_times(c, c.value(a), sa, c.value(b), sb[-1])
    check_shape(node, shapes.matmul, sa, sb)
    return c.graph.matmul(c.value(a), c.value(b))


def rows_times(
    c: Converter, x: SSAValue, shape: Sequence[int], w: SSAValue, n: int
) -> SSAValue:
    """``[..., k] @ [k, n]`` as one 2-d matmul over all rows: reshapes, which
    move nothing, flatten the leading dims and restore them."""
    rows = math.prod(shape[:-1])
    y = c.graph.matmul(c.graph.reshape(x, (rows, shape[-1])), w)
    return c.graph.reshape(y, (*shape[:-1], n))


def linear(c: Converter, node: fx.Node, x: Any, w: Any, b: Any = None) -> Value:
    """``F.linear`` / ``nn.Linear``: ``x @ W.T + b``. A parameter weight is
    transposed (and repeated over the batch dims) once, at capture; a weight
    that is a graph input (``torch.compile`` lifts parameters) is transposed by
    ``kernel.transpose`` and met by all rows of ``x`` at once."""
    (value,) = tensor_operands(c, node, x)
    sx, sw = node_shape(x), node_shape(w)
    if len(sx) < 2 or len(sw) != 2:
        raise unsupported(node, "a linear of a 1-d input or with a weight not 2-d")
    weight = parameter_of(c, w)
    if weight is not None:
        y = c.graph.matmul(value, c.constant(_batched(weight.t(), sx[:-2])))
    else:
        wt = c.graph.transpose(c.value(w), 0, 1)
        y = rows_times(c, value, sx, wt, sw[0])
    if b is None:
        return y
    return c.graph.add(y, ranked(c, b, len(node_shape(node))))


def addmm(
    c: Converter, node: fx.Node, bias: Any, a: Any, b: Any, *, beta=1, alpha=1
) -> Value:
    """``torch.addmm(bias, a, b)`` (GPT-2's ``Conv1D``): ``a @ b + bias``."""
    if beta != 1 or alpha != 1:
        raise unsupported(node, f"addmm with beta={beta}, alpha={alpha}")
    y = matmul(c, node, a, b)
    return c.graph.add(y, ranked(c, bias, len(node_shape(node))))
