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
replaced the same way, by what :mod:`mirage_xdsl.torch.convolutions` computes
it with: the input cut into patches, times the flattened kernel; and so is a
1-d convolution (Whisper's, and the depthwise causal one of Mamba, Bamba and
LFM2): the padded input read at each of the kernel's offsets, times the
kernel. Where a convolution is outside what they cover, it stays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import fx
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_flatten, tree_unflatten

from mirage_xdsl.torch.convolutions import patch_matmul, shifted_matmul
from mirage_xdsl.torch.nodes import aten

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
