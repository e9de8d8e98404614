"""One µGraph of a partitioned torch graph: its program and how torch calls it.

A part's outputs are what the rest of the graph reads of it. A generated
kernel writes each output once and a reshape moves nothing, so the program
returns each computed value once, unreshaped, and torch gives every output as
a view: of a program result, or of a part's input (or a parameter made at
capture) when the output is that input, unchanged or reshaped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx
from torch.utils._pytree import tree_flatten
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, SSAValue

from mirage_xdsl.dialects import kernel
from mirage_xdsl.torch.capture import Captured, Converter
from mirage_xdsl.torch.nodes import DTYPES, torch_dtype


@dataclass(frozen=True)
class Output:
    """Where a part's output comes from: the ``program``'s result, the part's
    ``input`` or the program's ``constant`` number ``index``, viewed as
    ``shape``."""

    source: str
    index: int
    shape: tuple[int, ...]


@dataclass
class Part:
    """One µGraph of a partitioned graph: its nodes, program and outputs."""

    name: str
    nodes: list[fx.Node]
    captured: Captured
    outputs: list[Output]
    graph_module: fx.GraphModule
    inputs: tuple[fx.Node, ...]
    results: tuple[fx.Node, ...]
    """The part's nodes the rest of the graph reads, in output order."""

    def computes(self) -> bool:
        """Whether the program does any work beyond moving no data."""
        return any(o.source == "program" for o in self.outputs)


def convert_graph(sub: fx.GraphModule, name: str) -> tuple[Captured, list[Output]]:
    """A self-contained ATen graph as a program and its output plan. Its
    placeholders are the inputs, all of the compute dtype (its first 16-bit
    float input's, else f32)."""
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    dtypes = [n.meta["val"].dtype for n in placeholders if "val" in n.meta]
    narrow = [d for d in dtypes if d in (torch.float16, torch.bfloat16)]
    converter = Converter(
        sub.graph, name, DTYPES[narrow[0] if narrow else torch.float32]
    )
    converter.bind_inputs()
    plan: list[Output] = []
    returned: dict[SSAValue, int] = {}
    for node in converter.walk():
        value = converter.value(node)
        shape = tuple(value.type.get_shape())  # type: ignore[attr-defined]
        base = _unviewed(value)
        if isinstance(base, BlockArgument):
            index = base.index
            kind = "input" if index < len(placeholders) else "constant"
            plan.append(
                Output(kind, index - (kind == "constant") * len(placeholders), shape)
            )
            continue
        if base not in returned:
            returned[base] = len(returned)
            converter.graph.mark_output(base)
        plan.append(Output("program", returned[base], shape))
    module = converter.graph.module()
    _drop_unused(module)
    _, spec = tree_flatten(tuple(range(len(returned))))
    return Captured(module, converter.parameters, spec), plan


def _unviewed(value: SSAValue) -> SSAValue:
    """The value ``value`` is a reshape chain of (itself if none)."""
    while isinstance(value.owner, kernel.ReshapeOp):
        value = value.owner.operands[0]
    return value


def _drop_unused(module: ModuleOp) -> None:
    """Erase ops whose results nothing reads (views left to torch)."""
    ops = [op for op in module.walk() if op.name.startswith("kernel.")]
    for op in reversed(ops):
        if all(not r.uses for r in op.results):
            op.erase()


class MiragePart(torch.nn.Module):
    """A part of a torch graph run by mirage: inputs converted to the
    program's dtype (a boolean mask to 0/1), outputs back to torch's dtypes,
    views of inputs taken by torch."""

    def __init__(self, run: Callable[..., Any], part: Part):
        super().__init__()
        from mirage_xdsl.semantics.interpreter import entry_function

        types = entry_function(part.captured.module).function_type.inputs.data
        self.run = run
        self.input_dtypes = [torch_dtype(t.element_type) for t in types]  # type: ignore[attr-defined]
        self.outputs = part.outputs
        self.output_dtypes = [n.meta["val"].dtype for n in part.results]
        self.constants = part.captured.parameters

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        results = self.run(
            *(
                x.to(dtype).contiguous()
                for x, dtype in zip(inputs, self.input_dtypes, strict=False)
            )
        )
        out = []
        for o, dtype in zip(self.outputs, self.output_dtypes, strict=True):
            if o.source == "program":
                y = results[o.index].reshape(o.shape)
            elif o.source == "input":
                y = inputs[o.index].reshape(o.shape)
            else:
                y = self.constants[o.index].to(inputs[0].device).reshape(o.shape)
            out.append(y.to(dtype))
        return tuple(out)
