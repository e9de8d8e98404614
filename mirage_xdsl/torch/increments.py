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
where that computes the same: an addition is taken only if its tensor is a
graph input (or may be a view of one: ``to``, ``view``, any op whose schema
says its result may alias its argument), and nothing reads that input or
any view of it after the addition (the layer read its counter before
bumping it). The ``_foreach_add_`` adds to the very tensors the additions
did.
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch import fx

_ADDS = (torch.ops.aten.add_.Tensor, torch.ops.aten.add_.Scalar)


def gather_increments(gm: fx.GraphModule) -> int:
    """Gather ``gm``'s in-place increments of graph inputs by the same
    constant into one ``_foreach_add_`` each, before its output; the number
    of increments gathered (none unless two or more share a constant)."""
    graph = gm.graph
    order = {node: i for i, node in enumerate(graph.nodes)}
    by_step: dict[tuple[type, int | float], list[fx.Node]] = defaultdict(list)
    for node in graph.nodes:
        step = _increment(node, order)
        if step is not None:  # 1 and 1.0 apart: 1.0 cannot be added to an int in place
            by_step[type(step), step].append(node)
    output = next(n for n in graph.nodes if n.op == "output")
    gathered = 0
    for (_, step), adds in by_step.items():
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
    source = _source(tensor)
    if source is None or source.op != "placeholder":
        return None
    later = (u for a in _aliases(source) for u in a.users if u is not node)
    if any(order[u] > order[node] for u in later):
        return None
    return step


def _may_alias(node: fx.Node) -> bool:
    """Whether ``node``'s result may be (a view of) its first argument, by
    its op's schema (``to``, ``view``, ``reshape``, a slice, an in-place op)."""
    schema = getattr(node.target, "_schema", None)
    return (
        node.op == "call_function"
        and schema is not None
        and bool(schema.returns)
        and schema.returns[0].alias_info is not None
        and bool(node.args)
        and isinstance(node.args[0], fx.Node)
    )


def _source(node: object) -> fx.Node | None:
    """The node ``node`` may be a view of, through ops that may alias."""
    if not isinstance(node, fx.Node):
        return None
    while _may_alias(node):
        node = node.args[0]
    return node


def _aliases(source: fx.Node) -> list[fx.Node]:
    """``source`` and every node that may be a view of it: a read of any of
    them after an increment reads the incremented tensor."""
    aliases, todo = [], [source]
    while todo:
        alias = todo.pop()
        aliases.append(alias)
        todo.extend(u for u in alias.users if _may_alias(u) and u.args[0] is alias)
    return aliases
