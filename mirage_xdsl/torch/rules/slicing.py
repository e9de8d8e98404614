"""Slices and concatenations: ``x[..., a:b]``, ``torch.cat``, ``stack``,
``split``, ``chunk``, ``unbind``, ``select``, ``repeat_interleave``, and
``F.pad`` with a constant (blocks of it concatenated).

A slice of consecutive elements is ``kernel.slice`` and a concatenation
``kernel.concat`` (``rotate_half`` of rotary embeddings, ``cat((-x2, x1))``,
is two slices, a negation and a concat; GPT-2's fused q/k/v projection is
split into three slices). A slice with a step has no kernel op: it is a
product with a 0/1 selection matrix along the dim (``S[i, j] = 1`` where
source ``i`` lands at ``j``), exact in the interpreter, on the GPU and in the
verifier's finite field. ``repeat_interleave`` by a whole number is the
same product, each source element selected for as many columns as it repeats
(the cos/sin tables of interleaved rotary embeddings: GPT-J, Cohere), and
``torch.stack`` a concatenation of its parts each given the new unit dim
(their ``rotate_every_two``: ``stack((-x2, x1), -1).flatten(-2)``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import fx
from xdsl.ir import SSAValue

from mirage_xdsl.torch.nodes import node_shape, unsupported
from mirage_xdsl.torch.rules.operands import (
    Converter,
    Empty,
    Parameter,
    Pieces,
    Value,
    parameter_of,
)


def sliced(c: Converter, a: Any, dim: int, picked: range) -> SSAValue:
    """The elements ``picked`` of ``a`` along ``dim``."""
    shape = node_shape(a)
    if picked == range(shape[dim]):
        return c.value(a)
    if picked.step == 1:
        return c.graph.slice(c.value(a), dim, picked.start, picked.stop)
    return along(c, c.value(a), shape, dim, selection(shape[dim], picked))


def along(
    c: Converter, x: SSAValue, shape: Sequence[int], dim: int, matrix: torch.Tensor
) -> SSAValue:
    """``x`` with dim ``dim`` (of ``n``) mapped through ``matrix`` (``[n, m]``):
    the dim is moved last, multiplied, and moved back."""
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


def slice_(
    c: Converter,
    node: fx.Node,
    a: Any,
    dim: int = 0,
    start: int | None = None,
    end: int | None = None,
    step: int = 1,
) -> Value:
    """``x[..., start:end:step]`` along ``dim``; of a module parameter or
    buffer, taken at capture (nanoGPT's ``self.bias[:, :, :T, :T]``)."""
    shape = node_shape(a)
    dim %= len(shape)
    picked = range(shape[dim])[slice(start, end, step)]
    if not picked:
        return Empty(node)
    if picked == range(shape[dim]):
        return c.env[a]
    tensor = parameter_of(c, a)
    if tensor is not None:
        index = (slice(None),) * dim + (slice(picked.start, picked.stop, picked.step),)
        return Parameter(tensor[index].contiguous(), node)
    return sliced(c, a, dim, picked)


def constant_pad(
    c: Converter, node: fx.Node, a: Any, pad: Sequence[int], value: Any = 0
) -> Value:
    """``F.pad(x, pad, value=v)`` in constant mode: along each padded dim,
    from the last, blocks of ``v`` (constants made at capture) concatenated
    before and after; a negative pad is a slice. Of a module parameter or
    buffer, applied at capture."""
    fill = float(value) if isinstance(value, int | float) else None
    if fill is None or not math.isfinite(fill):
        raise unsupported(node, f"a pad with the value {value!r} (finite numbers only)")
    tensor = parameter_of(c, a)
    if tensor is not None:
        return Parameter(torch.nn.functional.pad(tensor, list(pad), value=fill), node)
    shape = list(node_shape(a))
    x = c.value(a)
    for i in range(len(pad) // 2):
        dim = len(shape) - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        if before < 0 or after < 0:
            picked = range(shape[dim])[max(-before, 0) : shape[dim] - max(-after, 0)]
            x = c.graph.slice(x, dim, picked.start, picked.stop)
            shape[dim] = len(picked)
        parts = []
        for extent in (max(before, 0), None, max(after, 0)):
            if extent is None:
                parts.append(x)
            elif extent:
                block = [*shape[:dim], extent, *shape[dim + 1 :]]
                parts.append(c.constant(torch.full(block, fill)))
        x = concatenated(c, parts, dim)
        shape[dim] += max(before, 0) + max(after, 0)
    return x


def pad_(
    c: Converter,
    node: fx.Node,
    a: Any,
    pad: Sequence[int],
    mode: str = "constant",
    value: Any = None,
) -> Value:
    """``F.pad`` (``aten.pad``): the constant mode only."""
    if mode != "constant":
        raise unsupported(node, f"a pad in mode {mode!r} (constant only)")
    return constant_pad(c, node, a, pad, 0 if value is None else value)


def sliced_as(c: Converter, node: fx.Node, a: Any, dim: int, picked: range) -> SSAValue:
    """:func:`sliced`, reshaped to ``node``'s shape where that drops the dim
    (``x[..., i]``, a piece of ``unbind``)."""
    x = sliced(c, a, dim, picked)
    shape = tuple(node_shape(node))
    kept = tuple(x.type.get_shape())  # type: ignore[attr-defined]
    return x if kept == shape else c.graph.reshape(x, shape)


def select(c: Converter, node: fx.Node, a: Any, dim: int, index: int) -> Value:
    """``x[..., i]`` along ``dim``: a one-element slice without the dim."""
    shape = node_shape(a)
    dim %= len(shape)
    i = index % shape[dim]
    return sliced_as(c, node, a, dim, range(i, i + 1))


def cat(c: Converter, node: fx.Node, tensors: Sequence[Any], dim: int = 0) -> Value:
    """``torch.cat(tensors, dim)``: ``kernel.concat`` of the parts in turn
    (empty parts, which torch allows, are left out)."""
    shape = node_shape(node)
    dim %= len(shape)
    parts = [t for t in tensors if math.prod(node_shape(t))]
    if not parts:
        raise unsupported(node, "a concatenation of empty tensors")
    if any(len(node_shape(t)) != len(shape) for t in parts):
        raise unsupported(node, "a concatenation of tensors of different ranks")
    return concatenated(c, [c.value(t) for t in parts], dim)


def concatenated(c: Converter, parts: Sequence[SSAValue], dim: int) -> SSAValue:
    """``kernel.concat`` of ``parts`` along ``dim``, in turn."""
    out = parts[0]
    for part in parts[1:]:
        out = c.graph.concat(out, part, dim)
    return out


def stack(c: Converter, node: fx.Node, tensors: Sequence[Any], dim: int = 0) -> Value:
    """``torch.stack(tensors, dim)``: each part reshaped to hold the new dim
    (of size 1), then concatenated along it."""
    shape = node_shape(node)
    dim %= len(shape)
    unit = (*shape[:dim], 1, *shape[dim + 1 :])
    return concatenated(c, [c.graph.reshape(c.value(t), unit) for t in tensors], dim)


def repeat_interleave(
    c: Converter, node: fx.Node, a: Any, repeats: Any, dim: int | None = None, **kw
) -> Value:
    """``torch.repeat_interleave(x, r, dim)`` with a whole number ``r``: each
    element along ``dim`` ``r`` times in a row."""
    if not isinstance(repeats, int) or dim is None:
        raise unsupported(
            node, "repeat_interleave needs a whole number of repeats and a dim"
        )
    shape = node_shape(a)
    dim %= len(shape)
    picked = [i // repeats for i in range(shape[dim] * repeats)]
    return along(c, c.value(a), shape, dim, selection(shape[dim], picked))


def split(c: Converter, node: fx.Node, a: Any, size: Any, dim: int = 0) -> Value:
    """``torch.split(x, size_or_sizes, dim)``: one slice per piece read."""
    n = node_shape(a)[dim % len(node_shape(a))]
    sizes = [size] * -(-n // size) if isinstance(size, int) else list(size)
    sizes[-1] = n - sum(sizes[:-1])
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    ranges = tuple(range(s, s + k) for s, k in zip(starts, sizes, strict=True))
    return Pieces(a, dim % len(node_shape(a)), ranges, node)


def unbind(c: Converter, node: fx.Node, a: Any, dim: int = 0) -> Value:
    """``x.unbind(dim)`` (ModernBERT's ``q, k, v = qkv.unbind(-3)``): one
    piece per index, read without the dim."""
    shape = node_shape(a)
    dim %= len(shape)
    ranges = tuple(range(i, i + 1) for i in range(shape[dim]))
    return Pieces(a, dim, ranges, node)


def chunk(c: Converter, node: fx.Node, a: Any, chunks: int, dim: int = 0) -> Value:
    """``torch.chunk(x, chunks, dim)``: pieces of ``ceil(n / chunks)``."""
    n = node_shape(a)[dim % len(node_shape(a))]
    return split(c, node, a, -(-n // chunks), dim)


def piece(c: Converter, node: fx.Node, pieces: Pieces, index: int) -> SSAValue:
    """Piece ``index`` of a split, sliced when ``node`` reads it (and without
    the dim, for ``unbind``)."""
    return sliced_as(c, node, pieces.source, pieces.dim, pieces.ranges[index])
