"""Sibling ``nn.Linear``s: projections of one input captured as one matmul.

A Llama layer projects its normalised input three times (queries, keys,
values: ``[*, d] @ [d, h]``, ``[d, kv]``, ``[d, kv]``). Captured one by one,
they are three matmuls of different widths, which the search cannot put in
one kernel (a block graph's grid is uniform), so they run as three kernels
that each read the input again. Concatenated, they are one skinny matmul of
the input by ``[d, h + 2 kv]``, and each projection is a slice of its result
along the last dim: a contiguous range of its buffer at one token, which the
lowering reads in place (``lowering/aliases.py``).

The *siblings* of an ``aten.linear`` are the ``aten.linear`` ops whose input
is the same node, whose weights are module parameters (stacked once, at
capture; or, in a part of a ``torch.compile`` graph, weight inputs, whose
stack the part takes as an input of its own and makes once) of the same
``in_features``, and whose biases are all None or all parameters (or, in a
part, all inputs, joined as the weights are: Qwen2's q, k and v projections
have biases). They are fused when at least two remain after this test:

**Combined element-wise.** A sibling's *element-wise reach* is every
element-wise op (:data:`ELEMENTWISE`) its result flows into through
element-wise ops and layout ops only (:data:`PASS_THROUGH`: views, reshapes,
transposes, expands, copies, casts); a reduction, matmul, attention or any
other op ends the path. Two linears of one input are *combined element-wise*
when their reaches share an op. Such a pair (the gate and up projections of
``silu(w1(x)) * w3(x)``) stays two matmuls, and so does every linear combined
with any other linear of the input, fused or not: the search already fuses
the pair and the op combining them into one kernel, since their grids match.

``MIRAGE_FUSE_SIBLINGS=0`` captures every linear on its own (for comparing
the two, as ``tools/bench_sibling_linears.py`` does, and for debugging).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from torch import fx
from xdsl.ir import SSAValue

from mirage_xdsl.ops import OPS
from mirage_xdsl.torch.nodes import aten, node_shape
from mirage_xdsl.torch.rules.operands import Converter

ELEMENTWISE = frozenset(
    {getattr(aten, name) for spec in OPS.values() for name in spec.torch}
    | {
        aten.add,
        aten.sub,
        aten.rsub,
        aten.mul,
        aten.div,
        aten.sigmoid,
        aten.gelu,
        aten.sqrt,
        aten.rsqrt,
        aten.pow,
        aten.square,
    }
)
"""ATen ops that combine or map their operands element by element."""

PASS_THROUGH = frozenset(
    {
        aten.view,
        aten.reshape,
        aten._unsafe_view,
        aten.unsqueeze,
        aten.squeeze,
        aten.flatten,
        aten.t,
        aten.numpy_T,
        aten.transpose,
        aten.permute,
        aten.expand,
        aten.clone,
        aten.alias,
        aten.detach,
        aten.contiguous,
        aten.to,
        aten._to_copy,
        aten.type_as,
        aten.dropout,
    }
)
"""ATen ops that move or keep elements: an element-wise reach goes through them."""


@dataclass(frozen=True)
class Part:
    """A linear's result as a slice of a fused projection: columns
    ``[start, end)`` of ``fused``'s last dim."""

    fused: SSAValue
    start: int
    end: int


def linear_operands(node: fx.Node) -> tuple[Any, Any, Any]:
    """``(input, weight, bias)`` of an ``aten.linear`` node."""
    names = ("input", "weight", "bias")
    args = list(node.args) + [node.kwargs.get(n) for n in names[len(node.args) :]]
    return args[0], args[1], args[2]


def is_linear(node: fx.Node) -> bool:
    return node.op == "call_function" and (
        getattr(node.target, "overloadpacket", None) is aten.linear
    )


def fused_part(c: Converter, node: fx.Node) -> Part | None:
    """``node``'s slice of the fused projection of its siblings, made (one
    matmul, one add of the joined biases) when the first of them is
    converted; None when ``node`` is converted alone."""
    if node not in c.fused_linears and fusing_enabled():
        group = siblings(c, node)
        if len(group) >= 2:
            c.fused_linears.update(fuse(c, group))
    return c.fused_linears.get(node)


def fusing_enabled() -> bool:
    """Sibling linears are fused unless ``MIRAGE_FUSE_SIBLINGS`` is off."""
    value = os.environ.get("MIRAGE_FUSE_SIBLINGS", "1").lower()
    return value not in ("0", "off", "no", "false")


def siblings(c: Converter, node: fx.Node) -> list[fx.Node]:
    """The linears to fuse with ``node`` (``node`` included, in the order
    they use the input); empty when ``node`` is fused with none."""
    x = linear_operands(node)[0]
    if not isinstance(x, fx.Node) or not fusable(c, node, x):
        return []
    linears = [u for u in x.users if is_linear(u) and linear_operands(u)[0] is x]
    reach = {u: elementwise_reach(u) for u in linears}
    biased = linear_operands(node)[2] is not None
    group = [
        u
        for u in linears
        if (u is node or (u not in c.env and u not in c.fused_linears))
        and fusable(c, u, x)
        and (linear_operands(u)[2] is not None) == biased
        and not any(reach[u] & reach[v] for v in linears if v is not u)
    ]
    return group if node in group else []


def fusable(c: Converter, node: fx.Node, x: fx.Node) -> bool:
    """Whether ``node`` may join a fused projection: a 2-d weight reading
    ``x``'s last dim that the converter can join (:meth:`Converter.joinable`:
    a module parameter at capture; a part's weight input whose joined
    transpose it takes as an input of its own, ``torch/part.py``)."""
    _, w, b = linear_operands(node)
    if not isinstance(w, fx.Node) or len(node_shape(x)) < 2:
        return False
    shape = node_shape(w)
    return len(shape) == 2 and shape[1] == node_shape(x)[-1] and c.joinable(w, b)


def elementwise_reach(node: fx.Node) -> set[fx.Node]:
    """The element-wise ops ``node``'s result flows into through element-wise
    and layout ops only."""
    reach: set[fx.Node] = set()
    seen: set[fx.Node] = set()
    frontier = [node]
    while frontier:
        for user in frontier.pop().users:
            if user in seen:
                continue
            seen.add(user)
            packet = getattr(user.target, "overloadpacket", None)
            if packet in ELEMENTWISE:
                reach.add(user)
                frontier.append(user)
            elif packet in PASS_THROUGH:
                frontier.append(user)
    return reach


def fuse(c: Converter, group: list[fx.Node]) -> dict[fx.Node, Part]:
    """One matmul of the shared input by the joined transposed weights (and
    one add of the joined biases); each linear's columns of it."""
    x = linear_operands(group[0])[0]
    weights = [linear_operands(u)[1] for u in group]
    biases = [linear_operands(u)[2] for u in group]
    y = c.graph.matmul(c.value(x), c.joined(weights, biases))
    if biases[0] is not None:
        y = c.graph.add(y, c.joined_bias(biases))
    parts: dict[fx.Node, Part] = {}
    start = 0
    for u, w in zip(group, weights, strict=True):
        end = start + node_shape(w)[0]
        parts[u] = Part(y, start, end)
        start = end
    return parts
