"""In-place increments of graph inputs, gathered into one ``_foreach_add_``.

A static KV cache in ``transformers`` 5 keeps a length counter per layer, an
int64 scalar each decoder layer bumps in place
(``self.cumulative_length.add_(kv_length)``). In a graph of µGraph parts
those are glue ops, and Inductor writes each mutated input back with a
kernel of its own: one launch per layer and step for one integer. The
optimizer step's way of adding to many tensors, ``torch._foreach_add_``,
Inductor builds as one kernel for all of them.

:func:`gather_increments` replaces the in-place additions of one constant to
graph inputs by one ``aten._foreach_add_.Scalar`` at the end of the graph,
where that computes the same: an addition is taken only if nothing reads
its tensor after it (the layer read its counter before bumping it), and its
tensor is a graph input or that input under a ``to`` that changes nothing.
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch import fx

_ADDS = (torch.ops.aten.add_.Tensor, torch.ops.aten.add_.Scalar)
_NO_OP_TOS = (
    torch.ops.aten.to.dtype,
    torch.ops.aten.to.dtype_layout,
    torch.ops.aten.to.device,
)


def gather_increments(gm: fx.GraphModule) -> int:
    """Gather ``gm``'s in-place increments of graph inputs by the same
    constant into one ``_foreach_add_`` each, before its output; the number
    of increments gathered (none unless two or more share a constant)."""
    graph = gm.graph
    order = {node: i for i, node in enumerate(graph.nodes)}
    by_step: dict[int | float, list[fx.Node]] = defaultdict(list)
    for node in graph.nodes:
        step = _increment(node, order)
        if step is not None:
            by_step[step].append(node)
    output = next(n for n in graph.nodes if n.op == "output")
    gathered = 0
    for step, adds in by_step.items():
        if len(adds) < 2:
            continue
        with graph.inserting_before(output):
            graph.call_function(
                torch.ops.aten._foreach_add_.Scalar, ([a.args[0] for a in adds], step)
            )
        for add in adds:
            graph.erase_node(add)
        gathered += len(adds)
    if gathered:
        graph.lint()
        gm.recompile()
    return gathered


def _increment(node: fx.Node, order: dict[fx.Node, int]) -> int | float | None:
    """The constant ``node`` adds in place to a graph input nothing reads
    after it; None where it is not such an addition."""
    if node.op != "call_function" or node.target not in _ADDS or node.users:
        return None
    if len(node.args) != 2 or node.kwargs.get("alpha", 1) != 1:
        return None
    tensor, step = node.args
    if isinstance(step, bool) or not isinstance(step, (int, float)):
        return None
    aliases = _input_aliases(tensor)
    if aliases is None:
        return None
    later = (u for a in aliases for u in a.users if u is not node)
    if any(order[u] > order[node] for u in later):
        return None
    return step


def _input_aliases(node: object) -> list[fx.Node] | None:
    """The graph input ``node`` is (itself, or under ``to`` calls that change
    nothing) and every such alias of it; None where it is no graph input."""
    if not isinstance(node, fx.Node):
        return None
    while node.op == "call_function" and node.target in _NO_OP_TOS:
        if not _same_tensor(node, node.args[0]):
            return None
        node = node.args[0]
    if node.op != "placeholder":
        return None
    aliases, todo = [], [node]
    while todo:
        alias = todo.pop()
        aliases.append(alias)
        todo.extend(
            u
            for u in alias.users
            if u.target in _NO_OP_TOS and u.args[0] is alias and _same_tensor(u, alias)
        )
    return aliases


def _same_tensor(to: fx.Node, source: object) -> bool:
    """Whether the ``to`` call ``to`` returns ``source`` itself: same dtype
    and device (by the graph's metadata), no copy asked for."""
    if not isinstance(source, fx.Node) or to.kwargs.get("copy", False):
        return False
    a, b = to.meta.get("val"), source.meta.get("val")
    return (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and a.dtype == b.dtype
        and a.device == b.device
    )
