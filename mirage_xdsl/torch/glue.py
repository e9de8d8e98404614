"""The torch ops between µGraphs, compiled by Inductor.

After partitioning, a graph is µGraph calls (:class:`MiragePart` submodules)
with torch ops between them: index math, cache writes, views. Run eagerly,
each of those ops is one kernel launch. :func:`compile_glue` hands the graph
to Inductor instead, with each part an opaque op Inductor leaves alone:
``torch.ops.mirage.part(key, inputs)``, a :func:`torch.library.custom_op`
that mutates nothing and dispatches to the part registered under ``key``.
Inductor makes such an op a fallback kernel (an extern call in its wrapper)
and fuses the torch ops around it; AOTAutograd's functionalization keeps the
in-place writes to graph inputs (``index_copy_`` on a cache, ``add_`` on a
counter), applying them to the inputs once the graph has run.

The op returns only what a part makes: the first view of each program
result, and its constants, contiguous and sharing no storage with its inputs
or each other (an op's outputs may not alias its inputs or each other);
where two outputs are views of one buffer of the program, the buffer once,
the outputs taken from it in the graph (``returns.py``). A part's outputs
that are views of its inputs, or further views of a result, are torch views
in the graph.
Its fake implementation gives each output's shape and dtype from the FX
node's metadata, on the device of the part's first input.

An input of another dtype than the part's program computes in (rotary's
fp32 cos and sin, a boolean mask) is converted in the graph, before the op:
Inductor fuses the conversion into the kernel that makes the input, and one
converted tensor serves every part that reads it (each decoder layer), where
the part would convert it itself, one copy kernel per part and call. That
holds for a tensor a part passes on as a view (a layer's mask, reshaped for
the next layer's part): its reshapes share the one conversion. A conversion
more than one part reads is an opaque op of its own
(``torch.ops.mirage.converted``), since Inductor computes a tensor that
several opaque ops read once for each of them.

Inductor compiles the glue with combo kernels on: the small independent
kernels between two parts (a layer's key and value cache writes) run as one
launch where they would be one each. The in-place increments of graph inputs
(a static cache's length counter per layer) are gathered into one
``_foreach_add_`` first (``increments.py``), which Inductor builds as one
kernel.
"""

from __future__ import annotations

import copy
import itertools
import logging
import operator
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import fx

from mirage_xdsl.ir.diagnostics import error_line
from mirage_xdsl.torch.gradients import records
from mirage_xdsl.torch.increments import gather_increments
from mirage_xdsl.torch.nodes import traced_dtype
from mirage_xdsl.torch.part import MiragePart
from mirage_xdsl.torch.returns import Returns, returned, returns_of

log = logging.getLogger("mirage_xdsl.torch")

GLUE_MODES = ("inductor", "eager")

_PARTS: dict[str, tuple[MiragePart, Returns | None]] = {}
"""The parts graphs call, by key, with what their op returns where two of
their outputs share a buffer (``returns.py``)."""

_keys = itertools.count()


@torch.library.custom_op("mirage::part", mutates_args=())
def part_op(key: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The outputs a registered part makes (:meth:`MiragePart.compute`), or
    its slots (:func:`returns.returned`)."""
    part, plan = _PARTS[key]
    if plan is not None:
        return returned(part, plan, tuple(inputs))
    return part.compute(*inputs)


@torch.library.custom_op("mirage::converted", mutates_args=())
def converted_op(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` as ``dtype``, for more than one part: a tensor Inductor computes
    and several opaque ops read, it computes again for each of them (a
    model's one mask, converted once per decoder layer). An opaque op's
    result is computed once."""
    return x.to(dtype)


@converted_op.register_fake
def _converted_op_fake(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty_like(x, dtype=dtype)


@part_op.register_fake
def _part_op_fake(key: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    part, plan = _PARTS[key]
    device = part.device_of(inputs)
    return [
        torch.empty(shape, dtype=dtype, device=device)
        for shape, dtype in _specs(part, plan)
    ]


def _specs(
    part: MiragePart, plan: Returns | None
) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """The shape and dtype of each tensor the op returns."""
    if plan is not None:
        return [(s.shape, s.dtype) for s in plan.slots]
    return [(part.outputs[i].shape, part.output_dtypes[i]) for i in part.computed]


def register(part: MiragePart) -> str:
    """Register ``part`` for the op; its key names its program and outputs,
    so a cached compiled graph never calls a part of other outputs."""
    plan = returns_of(part)
    specs = ",".join(f"{dtype}{list(shape)}" for shape, dtype in _specs(part, plan))
    key = f"{next(_keys)}:{part.program}:{specs}"
    _PARTS[key] = (part, plan)
    return key


def as_custom_ops(gm: fx.GraphModule) -> list[str]:
    """Replace each ``MiragePart`` call of ``gm`` by the ``mirage::part`` op
    and views; the keys of the parts registered for it."""
    calls = [
        n
        for n in gm.graph.nodes
        if n.op == "call_module" and isinstance(gm.get_submodule(n.target), MiragePart)
    ]
    converted: dict[tuple[fx.Node, torch.dtype], fx.Node] = {}
    dtypes: dict[fx.Node, torch.dtype] = {}
    readers: dict[fx.Node, fx.Node] = {}
    keys = []
    for node in calls:
        part = gm.get_submodule(node.target)
        originals = _convert_inputs(gm.graph, node, part, converted, dtypes, readers)
        keys.append(register(part))
        _replace(gm.graph, node, part, keys[-1], originals, dtypes)
        gm.graph.erase_node(node)
        gm.delete_submodule(node.target)
    gm.graph.lint()
    gm.recompile()
    return keys


def _convert_inputs(
    graph: fx.Graph,
    node: fx.Node,
    part: MiragePart,
    converted: dict[tuple[fx.Node, torch.dtype], fx.Node],
    dtypes: dict[fx.Node, torch.dtype],
    readers: dict[fx.Node, fx.Node],
) -> list[Any]:
    """Make each input of ``node`` of another dtype than its part's program
    takes a conversion node (``converted``: those made so far, shared; a
    reshape of a tensor shares the tensor's); the inputs as they were. An
    input's dtype is its metadata's, or for an output of an earlier part's
    op, ``dtypes``'. A conversion more than one part reads is the opaque
    :func:`converted_op` (``readers``: the first part to read each)."""
    originals = list(node.args)
    args = list(originals)
    for i, (arg, dtype) in enumerate(zip(args, part.input_dtypes, strict=False)):
        if not isinstance(arg, fx.Node):
            continue
        has = dtypes.get(arg, traced_dtype(arg))
        if has is None or has == dtype:
            continue
        root = _unreshaped(arg)
        if (root, dtype) not in converted:
            with graph.inserting_before(node):
                converted[root, dtype] = graph.call_function(
                    torch.ops.prims.convert_element_type.default, (root, dtype)
                )
            readers[converted[root, dtype]] = node
        elif readers[converted[root, dtype]] is not node:  # a second part reads it
            converted[root, dtype].target = torch.ops.mirage.converted.default
        if (arg, dtype) not in converted:
            with graph.inserting_before(node):
                converted[arg, dtype] = graph.call_function(
                    torch.ops.aten.reshape.default,
                    (converted[root, dtype], arg.args[1]),
                )
        args[i] = converted[arg, dtype]
    node.args = tuple(args)
    return originals


def _unreshaped(node: fx.Node) -> fx.Node:
    """``node`` through its reshapes (an output that is a view of a part's
    input: a layer's mask, passed on to the next layer's part). Converting
    that tensor once and reshaping the converted one computes what
    converting each reshape would."""
    while node.op == "call_function" and node.target is torch.ops.aten.reshape.default:
        node = node.args[0]
    return node


def _replace(
    graph: fx.Graph,
    node: fx.Node,
    part: MiragePart,
    key: str,
    originals: list[Any],
    dtypes: dict[fx.Node, torch.dtype],
) -> None:
    """Call the op for ``node`` and give each ``getitem`` of it its output
    (an output that is a view of an input views ``originals``' tensor),
    recording each output's dtype in ``dtypes``."""
    inputs = list(node.args)
    with graph.inserting_before(node):
        call = graph.call_function(torch.ops.mirage.part.default, (key, inputs))
        made = _computed(graph, call, part, _PARTS[key][1])
        first = {
            part.outputs[i].index: i
            for i in part.computed
            if part.outputs[i].source == "program"
        }
        for user in list(node.users):
            i = user.args[1]
            if i not in made:
                o = part.outputs[i]
                if o.source == "input":
                    base = originals[o.index]
                    dtype = _input_dtype(part, o.index)
                else:
                    base = made[first[o.index]]
                    dtype = part.output_dtypes[first[o.index]]
                made[i] = _view(graph, base, dtype, o.shape, part.output_dtypes[i])
            dtypes[made[i]] = part.output_dtypes[i]
            user.replace_all_uses_with(made[i])
            graph.erase_node(user)


def _computed(
    graph: fx.Graph, call: fx.Node, part: MiragePart, plan: Returns | None
) -> dict[int, fx.Node]:
    """The node of each output the part computes: an item of the op's
    result, or views of its slot."""
    if plan is None:
        return {
            i: graph.call_function(operator.getitem, (call, k))
            for k, i in enumerate(part.computed)
        }
    slots = [
        graph.call_function(operator.getitem, (call, k)) for k in range(len(plan.slots))
    ]
    made = {}
    for i, (s, steps) in zip(part.computed, plan.taken, strict=True):
        view = slots[s]
        for kind, args in steps:
            if kind == "slice":
                dim, start, end = args
                target, view_args = torch.ops.aten.slice.Tensor, (view, dim, start, end)
            else:
                target, view_args = torch.ops.aten.reshape.default, (view, list(args))
            view = graph.call_function(target, view_args)
        made[i] = _view(
            graph,
            view,
            plan.slots[s].dtype,
            part.outputs[i].shape,
            part.output_dtypes[i],
        )
    return made


def _input_dtype(part: MiragePart, index: int) -> torch.dtype:
    """The torch dtype of the part's input ``index``."""
    inputs = [n for n in part.fallback.graph.nodes if n.op == "placeholder"]
    return inputs[index].meta["val"].dtype


def _view(
    graph: fx.Graph,
    base: fx.Node,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    to: torch.dtype,
) -> fx.Node:
    """``base`` (of ``dtype``) reshaped to ``shape``, converted to ``to``.
    ``base`` itself where it has that shape: Inductor realizes a reshape of a
    tensor it computes (a layer's mask, passed on to the next layer's part)
    as a buffer of its own, computed again, one kernel per part."""
    val = base.meta.get("val") if isinstance(base, fx.Node) else None
    if isinstance(val, torch.Tensor) and tuple(val.shape) == tuple(shape):
        view = base
    else:
        view = graph.call_function(torch.ops.aten.reshape.default, (base, list(shape)))
    if dtype == to:
        return view
    return graph.call_function(torch.ops.prims.convert_element_type.default, (view, to))


def compile_glue(
    gm: fx.GraphModule, example_inputs: Sequence[Any], graph: int
) -> Callable[..., Any]:
    """``gm`` with its torch ops compiled by Inductor and its parts as
    ``mirage::part`` ops; ``gm`` itself, eager, where a call records
    gradients (its parts then differentiate themselves: ``gradients.py``)
    or Inductor fails on it (one line says why). The parts it calls are
    registered while it lives."""
    if records([*example_inputs, *gm.parameters()]):
        log.info(
            "mirage: graph %d glue runs eagerly: it records gradients (each "
            "µGraph's backward runs its part again as torch)",
            graph,
        )
        return gm
    keys = as_custom_ops(gm)
    compiled = _compiled_glue(gm, example_inputs, graph)
    try:
        weakref.finalize(compiled, _forget, keys)
    except TypeError:  # a build no weak reference can follow keeps its parts
        pass
    return compiled


def _forget(keys: list[str]) -> None:
    """Unregister the parts of a compiled graph that is gone."""
    for key in keys:
        _PARTS.pop(key, None)


def _compiled_glue(
    gm: fx.GraphModule, example_inputs: Sequence[Any], graph: int
) -> Callable[..., Any]:
    """Inductor's build of ``gm`` (with combo kernels and its in-place
    increments gathered, or as it is without where that fails), or ``gm``
    where it cannot be used."""
    try:
        spare = copy.deepcopy(gm)  # Inductor may change the graph it fails on
    except Exception:  # a graph that cannot be copied gets one try, as it is
        spare = None
    if spare is not None:
        plain = _plain(gm)  # without the input guards, which read every input
        gather_increments(plain)
        try:
            return compile_fx(plain, list(example_inputs))
        except Exception as e:
            log.info(
                "mirage: graph %d glue is built as it is, without combo kernels: %s",
                graph,
                error_line(e),
            )
        gm = spare
    try:
        return compile_fx(_plain(gm), list(example_inputs), combo=spare is None)
    except Exception as e:
        log.warning(
            "mirage: graph %d glue runs eagerly: Inductor failed: %s",
            graph,
            error_line(e),
        )
        return gm


def _plain(gm: fx.GraphModule) -> fx.GraphModule:
    """``gm`` without an exported module's hooks and input guards (Dynamo
    guards the graph already): a module Inductor's cache can key."""
    for node in list(gm.graph.nodes):
        if node.op == "call_module" and node.target == "_guards_fn":
            gm.graph.erase_node(node)
    gm.recompile()
    return fx.GraphModule(gm, gm.graph)


def compile_fx(
    gm: fx.GraphModule, example_inputs: list[Any], combo: bool = True
) -> Callable[..., Any]:
    """Inductor's ``compile_fx``, with combo kernels or without (imported
    late: importing Inductor is slow)."""
    from torch._inductor import config
    from torch._inductor.compile_fx import compile_fx as inductor

    with config.patch(combo_kernels=combo):
        return inductor(gm, example_inputs)
