"""Slices and concatenations: ``x[..., a:b]``, ``torch.cat``, ``split``,
``chunk``, ``select``.

The kernel dialect has no slice or concat op of its own at the kernel level,
so each is a product with a 0/1 selection matrix along the dim: a slice of
``n`` elements to ``m`` is ``x @ S`` with ``S[i, j] = 1`` where source ``i``
lands at ``j``, a concatenation the sum of each part times its placement.
Both are exact (each output element is one input element times one), in the
interpreter, on the GPU and in the verifier's finite field. This is
``rotate_half`` of rotary embeddings written as ``cat((-x2, x1))``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import fx
from xdsl.ir import SSAValue

from mirage_xdsl.torch.nodes import node_shape, unsupported
from mirage_xdsl.torch.rules.operands import Converter, Pieces, Value


def along(
    c: Converter, x: SSAValue, shape: Sequence[int], dim: int, matrix: torch.Tensor
) -> SSAValue:
    """``x`` with dim ``dim`` (of ``n``) mapped through ``matrix`` (``[n, m]``):
    the dim is moved last, its rows multiplied, and moved back."""
    last = len(shape) - 1
    if dim != last:
        x = c.graph.transpose(x, dim, last)
    y = c.graph.matmul(x, c.constant(matrix))
    return c.graph.transpose(y, dim, last) if dim != last else y


def selection(n: int, picked: Sequence[int]) -> torch.Tensor:
    """``[n, len(picked)]``: column ``j`` selects source element ``picked[j]``."""
    matrix = torch.zeros(n, len(picked))
    matrix[list(picked), list(range(len(picked)))] = 1.0
    return matrix


def sliced(c: Converter, a: Any, dim: int, picked: Sequence[int]) -> SSAValue:
    """The elements ``picked`` of ``a`` along ``dim``."""
    shape = node_shape(a)
    if list(picked) == list(range(shape[dim])):
        return c.value(a)
    return along(c, c.value(a), shape, dim, selection(shape[dim], picked))


def slice_(
    c: Converter,
    node: fx.Node,
    a: Any,
    dim: int = 0,
    start: int | None = None,
    end: int | None = None,
    step: int = 1,
) -> Value:
    """``x[..., start:end:step]`` along ``dim``."""
    shape = node_shape(a)
    dim %= len(shape)
    picked = range(shape[dim])[slice(start, end, step)]
    if not picked:
        raise unsupported(node, "an empty slice")
    return sliced(c, a, dim, picked)


def select(c: Converter, node: fx.Node, a: Any, dim: int, index: int) -> Value:
    """``x[..., i]`` along ``dim``: a one-element slice without the dim."""
    shape = node_shape(a)
    dim %= len(shape)
    y = sliced(c, a, dim, [index % shape[dim]])
    return c.graph.reshape(y, node_shape(node))


def cat(c: Converter, node: fx.Node, tensors: Sequence[Any], dim: int = 0) -> Value:
    """``torch.cat(tensors, dim)``: the sum of each part placed by a
    selection matrix (part ``i`` of ``n_i`` lands at its offset)."""
    shape = node_shape(node)
    dim %= len(shape)
    parts = [t for t in tensors if math.prod(node_shape(t))]
    total, offset, out = shape[dim], 0, None
    for t in parts:
        ts = node_shape(t)
        if len(ts) != len(shape):
            raise unsupported(node, "a concatenation of tensors of different ranks")
        n = ts[dim]
        placement = selection(total, range(offset, offset + n)).t()
        y = along(c, c.value(t), ts, dim, placement)
        out = y if out is None else c.graph.add(out, y)
        offset += n
    if out is None:
        raise unsupported(node, "a concatenation of empty tensors")
    return out


def split(c: Converter, node: fx.Node, a: Any, size: Any, dim: int = 0) -> Value:
    """``torch.split(x, size_or_sizes, dim)``: one slice per piece."""
    n = node_shape(a)[dim % len(node_shape(a))]
    sizes = [size] * -(-n // size) if isinstance(size, int) else list(size)
    sizes[-1] = n - sum(sizes[:-1])
    return _pieces(c, node, a, dim, sizes)


def chunk(c: Converter, node: fx.Node, a: Any, chunks: int, dim: int = 0) -> Value:
    """``torch.chunk(x, chunks, dim)``: pieces of ``ceil(n / chunks)``."""
    n = node_shape(a)[dim % len(node_shape(a))]
    return split(c, node, a, -(-n // chunks), dim)


def _pieces(
    c: Converter, node: fx.Node, a: Any, dim: int, sizes: Sequence[int]
) -> Pieces:
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    ranges = tuple(range(s, s + n) for s, n in zip(starts, sizes, strict=True))
    return Pieces(a, dim % len(node_shape(a)), ranges, node)


def piece(c: Converter, pieces: Pieces, index: int) -> SSAValue:
    """Piece ``index`` of a split, sliced when it is read."""
    return sliced(c, pieces.source, pieces.dim, pieces.ranges[index])
