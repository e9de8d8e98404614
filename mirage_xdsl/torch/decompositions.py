"""Composite ops replaced, in place, by the ops torch computes them with.

``torch.einsum`` is a composite: torch computes an equation as permutes,
reshapes and a batched matmul (its ``CompositeImplicitAutograd`` kernel), but
``torch.export`` keeps the op whole, and no capture rule reads an equation.
Before a graph is captured, each such node is traced through its own
decomposition on the node's fake values (``make_fx``) and replaced by the
ops that come out, each with the node's source location, so the capture sees
the matmul and layout ops it has rules for. A node whose decomposition does
not trace to plain ops stays as it is.

A convolution whose windows tile its input (stride equal to the kernel, no
padding, dilation or groups: a vision transformer's patch embedding) is
replaced the same way, by :func:`patch_matmul`: the input cut into patches by
a reshape and a permute, times the flattened kernel. A 1-d convolution
(Whisper's, and the depthwise causal one of Mamba, Bamba and LFM2) is
replaced by :func:`shifted_matmul`: the padded input read at each of the
kernel's offsets, times the kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_flatten, tree_unflatten

from mirage_xdsl.torch.nodes import aten


class Kept(Exception):
    """The op's operands are outside what its decomposition covers: the op
    stays as it is."""


def _pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def patch_matmul(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> torch.Tensor:
    """``conv2d`` as a matmul, where its windows tile the input: each
    ``[C, kh, kw]`` patch is a row, times the kernel flattened to ``[O, C kh
    kw]``. Rows and columns past the last whole patch are not read, as the
    convolution does not read them. Raises :class:`Kept` otherwise."""
    out, channels, kh, kw = weight.shape
    if (
        x.dim() != 4
        or groups != 1
        or _pair(stride) != (kh, kw)
        or padding not in (0, "valid", (0, 0), [0, 0])
        or _pair(dilation) != (1, 1)
    ):
        raise Kept
    batch, _, height, width = x.shape
    h, w = height // kh, width // kw
    x = x[:, :, : h * kh, : w * kw]
    rows = x.reshape(batch, channels, h, kh, w, kw).permute(0, 2, 4, 1, 3, 5)
    rows = rows.reshape(batch, h * w, channels * kh * kw)
    y = rows @ weight.reshape(out, channels * kh * kw).t()
    if bias is not None:
        y = y + bias
    return y.reshape(batch, h, w, out).permute(0, 3, 1, 2)


def _single(v: Any) -> int:
    return int(v) if isinstance(v, int) else int(v[0])


def shifted_matmul(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> torch.Tensor:
    """``conv1d`` of a batch ``[B, C, T]`` as the padded input read at each
    of the kernel's ``K`` offsets (``[B, C, K, T_out]``, a slice per offset,
    one with a step where the stride is above 1), then a matmul by the
    kernel flattened to ``[O, C K]``; depthwise (``groups = C = O``), a
    product by each channel's taps summed over the offsets. Raises
    :class:`Kept` for other groups, an unbatched input and ``"same"``
    padding with a stride."""
    out, per_group, taps = weight.shape
    stride, dilation = _single(stride), _single(dilation)
    if x.dim() != 3:
        raise Kept
    batch, channels, length = x.shape
    if padding == "valid":
        left = right = 0
    elif padding == "same":
        if stride != 1:
            raise Kept
        left = dilation * (taps - 1) // 2
        right = dilation * (taps - 1) - left
    else:
        left = right = _single(padding)
    depthwise = groups == channels == out and per_group == 1
    if groups != 1 and not depthwise:
        raise Kept
    x = torch.nn.functional.pad(x, (left, right))
    span = length + left + right - dilation * (taps - 1)
    steps = (span - 1) // stride + 1
    shifted = [
        x[:, :, k * dilation : k * dilation + (steps - 1) * stride + 1 : stride]
        for k in range(taps)
    ]
    cols = torch.stack(shifted, dim=2)
    if depthwise:
        y = (cols * weight.reshape(channels, taps, 1)).sum(dim=2)
    else:
        y = weight.reshape(out, per_group * taps) @ cols.reshape(
            batch, channels * taps, steps
        )
    return y if bias is None else y + bias.reshape(out, 1)


DECOMPOSED: dict[Any, Callable[[fx.Node], Callable[..., Any]]] = {
    aten.einsum.default: lambda node: node.target.decompose,
    aten.conv2d.default: lambda node: patch_matmul,
    aten.conv2d.padding: lambda node: patch_matmul,  # padding="valid"
    aten.conv1d.default: lambda node: shifted_matmul,
    aten.conv1d.padding: lambda node: shifted_matmul,  # "valid" or "same"
}
"""The composite ops replaced, each by what computes it."""


def decompose_composites(graph: fx.Graph) -> int:
    """Replace each node of :data:`DECOMPOSED` by its decomposition; the
    number replaced."""
    replaced = 0
    for target, computed_by in DECOMPOSED.items():
        for node in list(graph.find_nodes(op="call_function", target=target)):
            sub = _traced(node, computed_by(node))
            if sub is not None:
                _inline(graph, node, sub)
                replaced += 1
    return replaced


def _traced(
    node: fx.Node, computed_by: Callable[..., Any]
) -> tuple[fx.GraphModule, list[fx.Node]] | None:
    """``computed_by`` on ``node``'s operands, traced on their fake values,
    and the nodes its placeholders stand for; None where it does not trace
    to ops alone."""
    flat, spec = tree_flatten((node.args, node.kwargs))
    inputs = [a for a in flat if isinstance(a, fx.Node)]
    vals = [a.meta.get("val") for a in inputs]
    if not vals or not all(isinstance(v, FakeTensor) for v in vals):
        return None

    def decomposed(*tensors: Any) -> Any:
        it = iter(tensors)
        items = [next(it) if isinstance(a, fx.Node) else a for a in flat]
        args, kwargs = tree_unflatten(items, spec)
        return computed_by(*args, **kwargs)

    try:
        with vals[0].fake_mode:
            sub = make_fx(decomposed)(*vals)
    except Exception:  # a decomposition that does not trace: keep the op
        return None
    ops = {n.op for n in sub.graph.nodes}
    if not ops <= {"placeholder", "call_function", "output"}:
        return None
    _compose_permutes(sub.graph)
    return sub, inputs


def _compose_permutes(graph: fx.Graph) -> None:
    """A permute of a permute as one permute, and none where the two undo
    each other: einsum's decomposition moves dims out of the way and back,
    and each permute apart would be a transpose of its own."""
    for node in list(graph.find_nodes(op="call_function", target=aten.permute.default)):
        inner = node.args[0]
        if not (
            isinstance(inner, fx.Node)
            and inner.target == aten.permute.default
            and len(inner.users) == 1
        ):
            continue
        rank = len(node.args[1])
        outer_order = [d % rank for d in node.args[1]]
        inner_order = [d % rank for d in inner.args[1]]
        order = [inner_order[d] for d in outer_order]
        if order == list(range(rank)):
            node.replace_all_uses_with(inner.args[0])
        else:
            node.args = (inner.args[0], order)
    graph.eliminate_dead_code()


def _inline(
    graph: fx.Graph, node: fx.Node, traced: tuple[fx.GraphModule, list[fx.Node]]
) -> None:
    sub, inputs = traced
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    env: dict[fx.Node, Any] = dict(zip(placeholders, inputs, strict=True))
    result: Any = None
    with graph.inserting_before(node):
        for n in sub.graph.nodes:
            if n.op == "call_function":
                new = graph.node_copy(n, lambda x: env[x])
                new.meta = {**node.meta, "val": n.meta.get("val")}
                env[n] = new
            elif n.op == "output":
                result = fx.node.map_arg(n.args[0], lambda x: env[x])
    node.replace_all_uses_with(result)
    graph.erase_node(node)
