"""Splitting a torch graph into µGraphs and torch ops.

``torch.compile(backend="mirage")`` hands over whole model graphs, most of
which mirage can take and some of which it cannot (embedding lookups, integer
index math, ``arange``, cos/sin tables, KV-cache writes, sampling). The graph
is lowered to ATen, and torch's own partitioner
(:class:`~torch.fx.passes.infra.partitioner.CapabilityBasedPartitioner`, as
torch_tensorrt and other backends use it) groups the nodes :class:`Support`
accepts into maximal subgraphs that keep the graph acyclic. Each subgraph is
converted with the capture rules; a node a rule refuses in context (a mean
that is not inside an RMSNorm, ...) is marked unsupported and the graph is
partitioned again, until every subgraph converts. Each then runs as one
:class:`MiragePart` (a :class:`~mirage_xdsl.torch.function.MirageFunction`
after the search); everything else runs as torch.

:class:`Account` records, per node, where it ran and why not in mirage.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.operator_support import OperatorSupportBase
from torch.fx.passes.utils.fuser_utils import (
    erase_nodes,
    fuse_as_graphmodule,
    insert_subgm,
    topo_sort,
)
from torch.utils._pytree import tree_flatten

from mirage_xdsl.torch.complex_products import real_complex_products
from mirage_xdsl.torch.decompositions import decompose_composites
from mirage_xdsl.torch.filled_buffers import concat_filled_buffers
from mirage_xdsl.torch.nodes import DTYPES, CaptureError, aten
from mirage_xdsl.torch.part import MiragePart, Part, convert_graph
from mirage_xdsl.torch.rules import ATEN_RULES, IGNORED, no_rule_reason
from mirage_xdsl.torch.rules.siblings import is_linear, linear_operands

LAYOUT_OPS = frozenset(
    {
        "kernel.reshape",
        "kernel.transpose",
        "kernel.slice",
        "kernel.concat",
        "kernel.broadcast",
        "kernel.cast",
    }
)
"""Kernel ops that only move or re-store elements: a part made only of these
stays torch, where most of them are views."""


class Support(OperatorSupportBase):
    """Which ATen nodes may join a µGraph: a rule exists, every tensor it reads
    and makes is a float (or a boolean mask, read as 0/1) of static shape, it
    mutates nothing, and it reads nothing an in-place op changes later.
    ``refused`` holds the nodes a rule refused in context, with the reason."""

    def __init__(self, graph: fx.Graph):
        super().__init__()
        self.refused: dict[fx.Node, str] = {}
        self.mutated_later = _mutated_later(graph)
        self.vmapped = _vmapped(graph)
        self.device = _compute_device(graph)
        self._reasons = {node: self._reason(node) for node in graph.nodes}

    def is_node_supported(self, submodules: Mapping[str, Any], node: fx.Node) -> bool:
        return self.reason(node) is None

    def reason(self, node: fx.Node) -> str | None:
        """Why ``node`` stays torch; None if it may join a µGraph. (Decided
        for the graph as given, before :func:`ordered_by_effects` adds its
        edges.)"""
        if node in self.refused:
            return self.refused[node]
        return self._reasons.get(node, "not an op")

    def _reason(self, node: fx.Node) -> str | None:
        if node.op != "call_function":
            return "not an op"
        if _is_mutating(node):
            return "an in-place op (it writes its input)"
        if node in self.vmapped:
            return "inside torch.vmap (it reads a batched tensor)"
        packet = getattr(node.target, "overloadpacket", node.target)
        if packet not in ATEN_RULES:
            return no_rule_reason(packet)
        for value in _tensor_values(node):
            if value.dtype not in DTYPES and value.dtype != torch.bool:
                return f"a {value.dtype} tensor (mirage computes in f16, bf16, f32)"
            if not all(isinstance(d, int) for d in value.shape):
                return "a dynamic shape"
            if 0 in value.shape and packet not in EMPTY_SAFE:
                return "an empty tensor (a dim of size 0)"
            if value.device.type != self.device:
                return (
                    f"a tensor on {value.device.type} (the graph's µGraphs run "
                    f"on {self.device})"
                )
        out = node.meta.get("val")
        if isinstance(out, torch.Tensor) and out.dtype == torch.bool:
            if packet not in BOOL_SAFE:
                return "a boolean result (only masks are read, as 0/1)"
        written = self.mutated_later.get(node, set())
        if any(alias_root(a) in written for a in node.all_input_nodes):
            return "it reads a tensor that an in-place op changes later"
        return None


EMPTY_SAFE = frozenset({aten.slice, aten.cat})
"""Ops that may meet an empty tensor: a slice makes one (Phi-3's
``q[..., rotary_dim:]``), which only a concatenation may read, and drops
(``rules/slicing.py``). Any other op on one, such as a mixture of experts'
linear over an expert that got no tokens, stays torch."""

BOOL_SAFE = frozenset(
    getattr(aten, name)
    for name in (
        "expand",
        "view",
        "reshape",
        "_unsafe_view",
        "unsqueeze",
        "slice",
        "select",
        "alias",
        "clone",
        "contiguous",
        "permute",
        "transpose",
        "squeeze",
        "bitwise_not",
        "logical_not",
    )
)
"""Ops whose boolean result is exactly theirs on the 0/1 copy of a mask: those
that only move its elements, and its negation (``1 - m``)."""


def on_cuda(inputs: Sequence[Any]) -> bool:
    """Whether a graph called on ``inputs`` is a CUDA graph: any of them is
    a CUDA tensor (a CPU tensor among them stays with the torch ops that
    read it)."""
    return any(isinstance(x, torch.Tensor) and x.is_cuda for x in inputs)


def _compute_device(graph: fx.Graph) -> str:
    """Where the graph's µGraphs run: ``cuda`` if it is a CUDA graph
    (:func:`on_cuda` of its inputs), else ``cpu``."""
    inputs = [n.meta.get("val") for n in graph.find_nodes(op="placeholder")]
    return "cuda" if on_cuda(inputs) else "cpu"


def _is_mutating(node: fx.Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    return schema is not None and schema.is_mutable


def _tensor_values(node: fx.Node) -> list[torch.Tensor]:
    """The tensors a node reads and makes (from the ``val`` metadata)."""
    values = [node.meta.get("val")]
    values += [a.meta.get("val") for a in node.all_input_nodes]
    flat, _ = tree_flatten(values)
    return [v for v in flat if isinstance(v, torch.Tensor)]


def _vmapped(graph: fx.Graph) -> set[fx.Node]:
    """The nodes that read a tensor batched by ``torch.vmap`` (Dynamo keeps
    its ``_add_batch_dim`` and ``_remove_batch_dim``: Mamba's reference scan,
    transformers' vmapped masks). Such a tensor exists only inside the vmap,
    so no µGraph may read it; each ``_add_batch_dim`` adds a level and each
    ``_remove_batch_dim`` takes one away."""
    levels: dict[fx.Node, int] = {}
    out: set[fx.Node] = set()
    for node in graph.nodes:
        read = max((levels.get(a, 0) for a in node.all_input_nodes), default=0)
        name = getattr(node.target, "__name__", "")
        if read:
            out.add(node)
        level = read + (name == "_add_batch_dim") - (name == "_remove_batch_dim")
        if level > 0:
            levels[node] = level
    return out


def _mutated_later(graph: fx.Graph) -> dict[fx.Node, set[fx.Node]]:
    """For each node, the tensors (as their alias roots) an in-place op
    writes after it."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    writes = [
        (order[n], alias_root(n)) for n in graph.nodes if _is_mutating(n) and n.args
    ]
    out: dict[fx.Node, set[fx.Node]] = {}
    for node in graph.nodes:
        later = {root for at, root in writes if at > order[node]}
        if later:
            out[node] = later
    return out


VIEWS = frozenset(
    getattr(aten, name)
    for name in (
        "view",
        "reshape",
        "_unsafe_view",
        "expand",
        "unsqueeze",
        "squeeze",
        "slice",
        "select",
        "alias",
        "transpose",
        "t",
        "permute",
        "as_strided",
        "split",
        "chunk",
        "narrow",
        "detach",
        "unflatten",
    )
)
"""Ops whose result may share its input's storage."""


ORDER_KEY = "_mirage_runs_after"
"""The keyword under which :func:`ordered_by_effects` adds its edges."""


@contextmanager
def ordered_by_effects(graph: fx.Graph) -> Iterator[None]:
    """Within the block, the order in-place ops (and torch.vmap's nesting)
    impose, as edges of the graph.

    torch's partitioner keeps a graph acyclic through its edges, but an
    in-place op orders what it does not feed: a node reading a tensor after
    an in-place op writes it must run after the op, and one reading it before,
    before. A µGraph holding a node that feeds the write (``k[..., :16].copy_(x
    * 2)``) and one that reads the written tensor (``k * 3``) would run both at
    one point, and so read the tensor before the write. Each such pair is
    made an edge (the later node gets the earlier as an extra keyword input,
    :data:`ORDER_KEY`), so the partitioner sees the cycle; the keywords are
    removed again on leaving.

    ``torch.vmap``'s nesting is such an effect too: the ops between its
    ``_vmap_increment_nesting`` and ``_vmap_decrement_nesting`` run inside the
    vmap, which neither feeds nor reads them; each is made to follow the one
    and precede the other, so a part's call placed late does not move them
    out of it."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    writes: dict[fx.Node, list[fx.Node]] = {}
    for node in graph.nodes:
        if _is_mutating(node) and node.args and isinstance(node.args[0], fx.Node):
            writes.setdefault(alias_root(node), []).append(node)
    added: dict[fx.Node, dict[str, Any]] = {}

    def edge(earlier: fx.Node, later: fx.Node) -> None:
        added.setdefault(later, dict(later.kwargs))
        edges = [*later.kwargs.get(ORDER_KEY, []), earlier]
        later.kwargs = {**later.kwargs, ORDER_KEY: edges}

    for node in graph.nodes:
        if node.op not in ("call_function", "call_module"):
            continue
        roots = {alias_root(a) for a in node.all_input_nodes}
        for w in (w for root in roots for w in writes.get(root, ()) if w is not node):
            edge(*((w, node) if order[w] < order[node] else (node, w)))
    nodes = list(order)
    for start, end in _vmap_nestings(graph):
        for node in nodes[order[start] + 1 : order[end]]:
            if node.op in ("call_function", "call_module"):
                edge(start, node)
                edge(node, end)
    try:
        yield
    finally:
        for node, kwargs in added.items():
            node.kwargs = kwargs


def _vmap_nestings(graph: fx.Graph) -> list[tuple[fx.Node, fx.Node]]:
    """Each ``torch.vmap`` level Dynamo kept: its ``_vmap_increment_nesting``
    and the ``_vmap_decrement_nesting`` that ends it."""
    open_: list[fx.Node] = []
    out: list[tuple[fx.Node, fx.Node]] = []
    for node in graph.nodes:
        name = getattr(node.target, "__name__", "")
        if name == "_vmap_increment_nesting":
            open_.append(node)
        elif name == "_vmap_decrement_nesting" and open_:
            out.append((open_.pop(), node))
    return out


def alias_root(node: fx.Node) -> fx.Node:
    """The node whose storage ``node`` may share: back through views and
    in-place ops (which return their input) to the first that is neither."""
    while (
        node.op == "call_function" and node.args and isinstance(node.args[0], fx.Node)
    ):
        packet = getattr(node.target, "overloadpacket", None)
        if packet not in VIEWS and not _is_mutating(node):
            break
        node = node.args[0]
    return node


@dataclass
class Account:
    """Where each op of a graph ran: ``parts`` as mirage, ``torch`` as torch
    with the reason for each."""

    parts: list[Part] = field(default_factory=list)
    torch: dict[fx.Node, str] = field(default_factory=dict)


def drop_empty_pieces(graph: fx.Graph) -> None:
    """Leave the empty tensors out of each ``aten.cat`` that has others of
    its result's dtype: torch skips them, and read by a part they would be
    inputs of no kernel and no size (a transformers ``DynamicCache`` layer
    starts as ``torch.tensor([])``, concatenated with the first keys)."""
    for node in graph.find_nodes(op="call_function", target=torch.ops.aten.cat.default):
        pieces = node.args[0]
        out = node.meta.get("val")
        vals = [p.meta.get("val") if isinstance(p, fx.Node) else None for p in pieces]
        if out is None or any(v is None for v in vals):
            continue
        kept = [p for p, v in zip(pieces, vals, strict=True) if v.numel()]
        if (
            kept
            and len(kept) < len(pieces)
            and all(v.dtype == out.dtype for v in vals if v.numel())
        ):
            node.args = (kept, *node.args[1:])


def partition(gm: fx.GraphModule) -> Account:
    """The µGraphs of ``gm`` and the reason each other op stays torch.

    torch.export's metadata checks (:data:`IGNORED`) are erased first: they
    compute nothing, but a check reading a value inside a part would make
    the value an output of the part (a norm's result, say, which then could
    not stay inside the kernel of the matmul reading it)."""
    for node in list(gm.graph.nodes):
        if node.target in IGNORED and not node.users:
            gm.graph.erase_node(node)
    decompose_composites(gm.graph)
    concat_filled_buffers(gm.graph)
    real_complex_products(gm.graph)
    drop_empty_pieces(gm.graph)
    support = Support(gm.graph)
    converted: dict[frozenset[str], Part | str] = {}
    while True:
        with ordered_by_effects(gm.graph):
            proposed = CapabilityBasedPartitioner(
                gm, support, allows_single_node_partition=True
            ).propose_partitions()
            hoist_siblings(proposed)
        parts, retry = [], False
        for i, p in enumerate(proposed):
            nodes = topo_sort(list(p.nodes))
            key = frozenset(n.name for n in nodes)
            if key not in converted:
                converted[key] = _convert(gm, nodes, f"mirage_{i}", support)
            result = converted[key]
            if result is None:
                retry = True
            elif isinstance(result, Part):
                parts.append(result)
        if not retry:
            break
    _name_in_order(parts)
    account = Account(parts)
    taken = {n for part in parts for n in part.nodes}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node not in taken:
            account.torch[node] = support.reason(node) or "only layout changes"
    return account


def _name_in_order(parts: list[Part]) -> None:
    """Name the parts ``mirage_0``, ``mirage_1``, ... in the order they were
    proposed. A part converted in an earlier round of partitioning kept the
    name its index gave it then, which a later round's part at that index
    took too; the names are the submodules the parts are called by, so they
    must differ."""
    for k, part in enumerate(parts):
        part.name = f"mirage_{k}"
        type(part.graph_module).__name__ = part.name


def hoist_siblings(proposed: list[Partition]) -> None:
    """Move each linear into an earlier partition holding a linear of the
    same input, with the views and weight transposes only it reads there,
    where nothing it reads comes later than that partition.

    The partitioner groups a node with its users: a Llama layer's query
    projection joins the attention, after the KV-cache write that stays
    torch, while the key and value projections of the same normalised input
    end the part before it. Moved to them, the three are one skinny matmul
    (``rules/siblings.py``) and the normalised input is no part's output."""
    owner = {n: p for p in proposed for n in p.nodes}
    for late in proposed:
        for node in topo_sort(list(late.nodes)):
            if owner.get(node) is not late or not is_linear(node):
                continue
            source = linear_operands(node)[0]
            for early in proposed:
                if early is late or not any(
                    is_linear(m) and linear_operands(m)[0] is source
                    for m in early.nodes
                ):
                    continue
                moved = _hoistable(node, late, early, owner)
                if moved:
                    for n in moved:
                        late.remove_node(n)
                        early.add_node(n)
                        owner[n] = early
                    break
    proposed[:] = [p for p in proposed if p.size()]


def _hoistable(
    node: fx.Node, late: Partition, early: Partition, owner: dict[fx.Node, Partition]
) -> list[fx.Node]:
    """``node`` and what only it reads of ``late``, if ``early`` can take them
    without reading anything computed after it; else nothing."""
    before = _ancestors(early.nodes)
    if any(n in before for n in late.nodes):
        return []
    taken, todo = [node], [node]
    while todo:
        for arg in todo.pop().all_input_nodes:
            if arg in taken or owner.get(arg) is early or arg in before:
                continue
            if arg.op in ("placeholder", "get_attr"):
                continue
            if owner.get(arg) is not late or any(u not in taken for u in arg.users):
                return []
            taken.append(arg)
            todo.append(arg)
    return taken


def _ancestors(nodes) -> set[fx.Node]:
    """Every node ``nodes`` read, directly or through others."""
    seen: set[fx.Node] = set()
    todo = [a for n in nodes for a in n.all_input_nodes]
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(n.all_input_nodes)
    return seen


def _convert(
    gm: fx.GraphModule, nodes: list[fx.Node], name: str, support: Support
) -> Part | str | None:
    """The part for ``nodes``; None after marking a refused node (partition
    again); a reason string when the part is not worth a µGraph."""
    sub, inputs, results = fuse_as_graphmodule(
        gm, nodes, name, always_return_tuple=True
    )
    by_name = {n.name: n for n in nodes}
    try:
        captured, outputs, stacked = convert_graph(sub)
    except CaptureError as e:
        node = by_name.get(e.node.name) if e.node is not None else None
        support.refused[node or nodes[0]] = e.reason
        return None
    part = Part(
        name, nodes, captured, outputs, sub, tuple(inputs), tuple(results), stacked
    )
    kernel_ops = {
        op.name for op in captured.module.walk() if op.name.startswith("kernel.")
    }
    if kernel_ops <= LAYOUT_OPS or not part.computes():
        return "only layout changes"
    return part


def _insert_subgm(gm: fx.GraphModule, sub: fx.GraphModule, part: Part) -> None:
    """Add ``sub``'s call to ``gm`` after the part's last node (torch 2.12 on takes
    that insertion point; earlier releases insert after the part's last result,
    and the topological sort that follows puts the rest in order)."""
    if "insertion_point" in inspect.signature(insert_subgm).parameters:
        insert_subgm(gm, sub, part.inputs, part.results, part.nodes[-1])
    else:
        insert_subgm(gm, sub, part.inputs, part.results)


def fuse(
    gm: fx.GraphModule, parts: list[Part], run: Callable[[Part], Callable]
) -> None:
    """Replace each part's nodes in ``gm`` by one call of ``MiragePart``."""
    for part in parts:
        sub = part.graph_module
        _insert_subgm(gm, sub, part)
        erase_nodes(gm, part.nodes)
        gm.add_submodule(type(sub).__name__, MiragePart(run(part), part))
    # each part's call sits at its last node: what it feeds moves after it,
    # and with the writes' edges, what reads those writes' tensors moves too
    with ordered_by_effects(gm.graph):
        torch.fx.passes.tools_common.stable_topological_sort(gm)
    for node in gm.graph.nodes:  # the sort made a new graph of copies
        if ORDER_KEY in node.kwargs:
            node.kwargs = {k: v for k, v in node.kwargs.items() if k != ORDER_KEY}
    gm.graph.lint()
    gm.recompile()
