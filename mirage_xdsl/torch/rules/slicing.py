"""Slices and concatenations: ``x[..., a:b]``, ``torch.cat``, ``split``,
``chunk``, ``select``.

The kernel dialect has no slice or concat op of its own at the kernel level,
so each is a product with a matrix along the dim: a slice of ``n`` elements
to ``m`` is ``x @ S`` with ``S[i, j] = 1`` where source ``i`` lands at ``j``,
a negated slice ``x @ -S``, and a concatenation of such selections of one
tensor along the dim they select ``x @ [S_1 | S_2 | ...]``. Rules keep a
selection as a :class:`Selected` stand-in, so ``rotate_half`` of rotary
embeddings, ``cat((-x[.., d/2:], x[.., :d/2]))``, is one matmul by a signed
permutation. Every product is exact (each output element is one input
element times 1 or -1), in the interpreter, on the GPU and in the verifier's
finite field. Parts of other tensors are placed by selections and summed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import fx
from xdsl.ir import SSAValue

from mirage_xdsl.torch.nodes import node_shape, unsupported
from mirage_xdsl.torch.rules.operands import Converter, Pieces, Selected, Value


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


def selected(a: Any, dim: int, picked: Sequence[int], node: fx.Node) -> Selected:
    """The elements ``picked`` of ``a`` along ``dim``, as a stand-in."""
    return Selected(a, dim, selection(node_shape(a)[dim], picked), node)


def materialise_selected(c: Converter, s: Selected) -> SSAValue:
    """A :class:`Selected` value as ops (none if it selects everything)."""
    shape = node_shape(s.source)
    if torch.equal(s.matrix, torch.eye(shape[s.dim])):
        return c.value(s.source)
    return along(c, c.value(s.source), shape, s.dim, s.matrix)


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
    if list(picked) == list(range(shape[dim])):
        return c.env[a]
    return selected(a, dim, picked, node)


def select(c: Converter, node: fx.Node, a: Any, dim: int, index: int) -> Value:
    """``x[..., i]`` along ``dim``: a one-element slice without the dim."""
    shape = node_shape(a)
    dim %= len(shape)
    y = materialise_selected(c, selected(a, dim, [index % shape[dim]], node))
    return c.graph.reshape(y, node_shape(node))


def cat(c: Converter, node: fx.Node, tensors: Sequence[Any], dim: int = 0) -> Value:
    """``torch.cat(tensors, dim)``: selections of one tensor along ``dim`` are
    one selection (their matrices side by side); other parts are placed by a
    selection matrix each (part ``i`` of ``n_i`` lands at its offset) and
    summed."""
    shape = node_shape(node)
    dim %= len(shape)
    parts = [t for t in tensors if math.prod(node_shape(t))]
    picks = [c.env.get(t) for t in parts]
    if all(isinstance(p, Selected) for p in picks):
        sources = {(p.source, p.dim) for p in picks}  # type: ignore[union-attr]
        if len(sources) == 1 and next(iter(sources))[1] == dim:
            matrix = torch.cat([p.matrix for p in picks], dim=1)  # type: ignore[union-attr]
            return Selected(picks[0].source, dim, matrix, node)  # type: ignore[union-attr]
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


def piece(pieces: Pieces, index: int, node: fx.Node) -> Selected:
    """Piece ``index`` of a split."""
    return selected(pieces.source, pieces.dim, pieces.ranges[index], node)


def negated(c: Converter, node: fx.Node, a: Any) -> Value | None:
    """``-x`` of a selection is the selection by the negated matrix."""
    s = c.env.get(a)
    if isinstance(s, Selected):
        return Selected(s.source, s.dim, -s.matrix, node)
    return None
