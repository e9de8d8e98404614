"""Shape changes (views, reshapes, transposes, permutes, expands), the ops
that compute nothing (copies, aliases, same-dtype casts), and a complex
buffer's real pairs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import fx

from mirage_xdsl.torch.nodes import (
    DTYPES,
    aten,
    node_meta,
    node_shape,
    unsupported,
)
from mirage_xdsl.torch.rules.operands import (
    Converter,
    Expanded,
    Parameter,
    Value,
    parameter_of,
)


def shape_change(c: Converter, node: fx.Node, a: Any, *args: Any, **kw: Any) -> Value:
    """A transpose, permute, reshape or expand of a parameter is applied to the
    parameter at capture; of a computed tensor, it becomes layout ops
    (:func:`layout_change`)."""
    tensor = parameter_of(c, a)
    if tensor is not None:
        if node.target in EXPANDS:  # expand_as's operand is a node: its shape
            return Parameter(tensor.expand(node_shape(node)).contiguous(), node)
        return Parameter(node.target(tensor, *args, **kw).contiguous(), node)
    if node_shape(node) == node_shape(a) and node.target not in SWAPS:
        return c.env[a]  # a view that changes nothing
    expanded = c.env.get(a)
    if isinstance(expanded, Expanded) and node.target not in SWAPS | EXPANDS:
        return replace(expanded, reshape=node_shape(node))
    if node.target in EXPANDS:
        return Expanded(c.value(a), node_shape(node), node)
    return layout_change(c, node, a, *args)


def repeat(c: Converter, node: fx.Node, a: Any, repeats: Sequence[int]) -> Value:
    """``x.repeat(*repeats)``: of a parameter, made at capture; of a computed
    tensor, an expand (an :class:`Expanded` stand-in). Each dim repeated is
    given a new dim of extent 1 in front, expanded to its count, and the
    pairs merged after (a reshape): ``[a, b].repeat(2, 1)`` is ``[1, a,
    b]`` expanded to ``[2, a, b]``, then ``[2 a, b]``."""
    tensor = parameter_of(c, a)
    if tensor is not None:
        return Parameter(tensor.repeat(*repeats).contiguous(), node)
    shape = node_shape(a)
    padded = (1,) * (len(repeats) - len(shape)) + tuple(shape)
    viewed: list[int] = []
    expanded: list[int] = []
    for count, extent in zip(repeats, padded, strict=True):
        if count != 1 and extent != 1:
            viewed.append(1)
            expanded.append(count)
        viewed.append(extent)
        expanded.append(extent * count if extent == 1 else extent)
    x = c.value(a)
    if tuple(expanded) == tuple(shape):
        return x
    if tuple(viewed) != tuple(shape):
        x = c.graph.reshape(x, tuple(viewed))
    out = node_shape(node)
    return Expanded(x, tuple(expanded), node, None if tuple(expanded) == out else out)


EXPANDS = {aten.expand.default, aten.expand_as.default}
"""An expand of a computed tensor is an :class:`Expanded` stand-in
(``expand_as``: ``F.normalize`` writes its norm so)."""


SWAPS = {aten.t.default, aten.numpy_T.default, aten.transpose.int, aten.permute.default}
"""Shape changes that move elements (the others keep the row-major order)."""


def layout_change(c: Converter, node: fx.Node, a: Any, *args: Any) -> Value:
    """``view``/``reshape``/``unsqueeze``/``flatten`` become ``kernel.reshape``;
    ``transpose``, ``t`` and ``permute`` become ``kernel.transpose`` (a
    permutation, one swap of two dims after another). A permutation that moves
    only dims of extent 1 (``[b, 1, h, d] -> [b, h, 1, d]`` at one token) keeps
    the row-major order, so it is a reshape: no kernel."""
    x = c.value(a)
    shape = node_shape(a)
    rank = len(shape)
    if node.target in SWAPS:
        if node.target == aten.permute.default:
            order = [d % rank for d in args[0]]
        else:
            d0, d1 = (args[0], args[1]) if args else (0, rank - 1)
            order = list(range(rank))
            order[d0 % rank], order[d1 % rank] = order[d1 % rank], order[d0 % rank]
        if keeps_order(shape, order):
            return c.graph.reshape(x, node_shape(node))
        for i, j in swaps(order):
            x = c.graph.transpose(x, i, j)
        return x
    return c.graph.reshape(x, node_shape(node))


def keeps_order(shape: Sequence[int], order: Sequence[int]) -> bool:
    """Whether permuting dims into ``order`` leaves the elements in the same
    row-major order: the dims of extent above 1 keep their relative order."""
    moved = [d for d in order if shape[d] > 1]
    return moved == sorted(moved)


def swaps(order: Sequence[int]) -> list[tuple[int, int]]:
    """Swaps of two dims that, applied in turn, permute dims into ``order``
    (result dim ``i`` is source dim ``order[i]``): a selection sort."""
    current = list(range(len(order)))
    out = []
    for i, want in enumerate(order):
        j = current.index(want)
        if j != i:
            current[i], current[j] = current[j], current[i]
            out.append((i, j))
    return out


def identity(c: Converter, node: fx.Node, a: Any, *rest: Any, **kw: Any) -> Value:
    """Copies, aliases and casts between float dtypes compute nothing: every
    kernel computes in fp32 and stores in the program's one compute dtype, so
    ``x.to(torch.float32)`` ... ``.to(input_dtype)`` folds away."""
    if node_meta(node).dtype not in DTYPES:
        raise unsupported(
            node, f"a cast to {node_meta(node).dtype} (mirage computes in floats)"
        )
    if node_shape(node) != node_shape(a):
        raise unsupported(node, "a copy that changes the shape")
    return c.env[a]


def view_as_real(c: Converter, node: fx.Node, a: Any) -> Value:
    """The real pairs of a complex module buffer (a table of rotations made
    with ``torch.polar``), taken at capture; a complex product read through
    it is real arithmetic already (``complex_products.py``)."""
    tensor = parameter_of(c, a)
    if tensor is None:
        raise unsupported(node, "view_as_real of a computed complex tensor")
    return Parameter(torch.view_as_real(tensor).contiguous(), node)


def dropout(c: Converter, node: fx.Node, a: Any, p: float, train: Any) -> Value:
    """``F.dropout`` in eval mode or with ``p=0`` is the identity."""
    if train and p:
        raise unsupported(node, f"dropout with p={p} in training (no random op)")
    return c.env[a]
