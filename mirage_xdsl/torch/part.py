"""One µGraph of a partitioned torch graph: its program and how torch calls it.

A part's outputs are what the rest of the graph reads of it. A generated
kernel writes each output once and a reshape moves nothing, so the program
returns each computed value once, unreshaped, and torch gives every output as
a view: of a program result, or of a part's input (or a parameter made at
capture) when the output is that input, unchanged or reshaped.

A linear layer's ``[out, in]`` weight reaches a part as an input (Dynamo lifts
parameters), and the program reads it as it is, transposed by its loads
(``fold-transposes``): no copy. Sibling linears of one input (q, k and v:
``rules/siblings.py``) share one input instead, their weights stacked
(``[sum of out, in]``), so they are one matmul, and so do their biases when
they have them; :class:`MiragePart` makes each stack once and keeps it while
its inputs are unchanged (same storage, same version counter).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx
from torch.utils._pytree import tree_flatten
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import BlockArgument, SSAValue

from mirage_xdsl.dialects import kernel
from mirage_xdsl.ir.diagnostics import error_line
from mirage_xdsl.torch.capture import Captured, Converter
from mirage_xdsl.torch.gradients import differentiable, records
from mirage_xdsl.torch.nodes import DTYPES, node_shape, torch_dtype, traced_dtype
from mirage_xdsl.torch.rules.siblings import (
    fusing_enabled,
    linear_operands,
    siblings,
)
from mirage_xdsl.torch.rules.siblings import (
    is_linear as node_is_linear,
)

log = logging.getLogger("mirage_xdsl.torch")


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

    stacked: list[tuple[int, ...]]
    """Per stacked input following the part's inputs as program inputs, the
    inputs (sibling linears' weights, or their biases) it holds stacked."""

    def computes(self) -> bool:
        """Whether the program does any work beyond moving no data."""
        return any(o.source == "program" for o in self.outputs)


def convert_graph(
    sub: fx.GraphModule,
) -> tuple[Captured, list[Output], list[tuple[int, ...]]]:
    """A self-contained ATen graph as a program, its output plan and the
    groups of inputs the program takes stacked. Its placeholders are the
    inputs, all of the compute dtype (:func:`compute_dtype`), followed by
    those stacks; it is named after its content."""
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    converter = PartConverter(sub.graph, "part", DTYPES[compute_dtype(placeholders)])
    converter.bind_inputs()
    plan: list[Output] = []
    returned: dict[SSAValue, int] = {}
    for node in converter.walk():
        value = converter.value(node)
        shape = tuple(value.type.get_shape())  # type: ignore[attr-defined]
        base = _unviewed(value)
        if isinstance(base, BlockArgument):
            plan.append(
                _argument_output(base.index, len(placeholders), converter, shape)
            )
            continue
        if base not in returned:
            returned[base] = len(returned)
            converter.graph.mark_output(base)
        plan.append(Output("program", returned[base], shape))
    module = converter.graph.module()
    _drop_unused(module)
    _name_by_content(module)
    _, spec = tree_flatten(tuple(range(len(returned))))
    captured = Captured(module, converter.parameters, spec)
    return captured, plan, converter.stacked_indices


def compute_dtype(placeholders: Sequence[fx.Node]) -> torch.dtype:
    """The float dtype most of the part's input elements have (a 16-bit one
    on a tie; f32 without float inputs). A bf16 model's part computes in
    bf16 though it reads an fp32 table of cosines; an fp32 model's part
    computes in fp32 though it reads a bf16 scalar buffer (RecurrentGemma's
    ``normalizer``), which a rule of the first 16-bit input rounded the
    whole part to."""
    elements: dict[torch.dtype, int] = {}
    for node in placeholders:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.dtype in DTYPES:
            elements[val.dtype] = elements.get(val.dtype, 0) + val.numel()
    if not elements:
        return torch.float32
    return max(elements, key=lambda d: (elements[d], d != torch.float32))


def _argument_output(
    index: int, inputs: int, converter: PartConverter, shape: tuple[int, ...]
) -> Output:
    """The output that is program argument ``index`` (a part's input or a
    constant made at capture; never a transpose, which only a matmul reads)."""
    if index < inputs:
        return Output("input", index, shape)
    return Output("constant", index - inputs - len(converter.stacked_indices), shape)


class PartConverter(Converter):
    """The converter of a part: sibling linears of one input
    (``rules/siblings.py``: q, k and v) get one input holding their weights
    stacked (bound after the part's inputs), read transposed."""

    def bind_inputs(self) -> None:
        super().bind_inputs()
        placeholders = [n for n in self.fx_graph.nodes if n.op == "placeholder"]
        self.placeholders = placeholders
        self.stacks: dict[tuple[fx.Node, ...], SSAValue] = {}
        """Per group of sibling weights, its stack read transposed; per group
        of their biases, its stack."""
        self.stacked_indices: list[tuple[int, ...]] = []
        """Per stacked input, in order: the part inputs it is made of."""
        linears = [n for n in self.fx_graph.nodes if node_is_linear(n)]
        grouped: set[fx.Node] = set()
        for node in linears if fusing_enabled() else []:
            group = [] if node in grouped else siblings(self, node)
            if len(group) >= 2:
                grouped.update(group)
                self._bind([linear_operands(u)[1] for u in group], transposed=True)
                biases = [linear_operands(u)[2] for u in group]
                if biases[0] is not None:
                    self._bind(biases, transposed=False)

    def _bind(self, tensors: list[fx.Node], transposed: bool) -> None:
        """One input holding ``tensors`` stacked along their first dim (read
        transposed: weights ``[sum of out, in]`` as ``[in, sum of out]``)."""
        key = tuple(tensors)
        if key in self.stacks:
            return
        shapes = [node_shape(t) for t in tensors]
        shape = (sum(s[0] for s in shapes), *shapes[0][1:])
        stacked = self.graph.new_input(shape, self.dtype)
        self.stacks[key] = (
            self.graph.transpose(stacked, 0, 1) if transposed else stacked
        )
        self.stacked_indices.append(tuple(self.placeholders.index(t) for t in tensors))

    def joinable(self, weight: Any, bias: Any) -> bool:
        """A weight input, and no bias or a bias input of one element per
        output: joined as the weights are, once while they are unchanged."""
        if weight not in self.placeholders:
            return False
        if bias is None:
            return True
        return bias in self.placeholders and node_shape(bias) == node_shape(weight)[:1]

    def joined(self, weights: list[fx.Node], biases: list[Any]) -> SSAValue:
        return self.stacks[tuple(weights)]

    def joined_bias(self, biases: list[fx.Node]) -> SSAValue:
        return self.stacks[tuple(biases)]


def _name_by_content(module: ModuleOp) -> None:
    """Name the program ``part_<digest of its text>``: parts that compute the
    same (every layer of a model) are one program, which the search and the
    kernel caches find again."""
    from mirage_xdsl.ir.printing import module_text
    from mirage_xdsl.semantics.interpreter import entry_function

    digest = hashlib.sha256(module_text(module).encode()).hexdigest()[:12]
    entry_function(module).sym_name = StringAttr(f"part_{digest}")


def _unviewed(value: SSAValue) -> SSAValue:
    """The value ``value`` is a reshape chain of (itself if none)."""
    while isinstance(value.owner, kernel.ReshapeOp):
        value = value.owner.operands[0]
    return value


def _drop_unused(module: ModuleOp) -> None:
    """Erase ops whose results nothing reads (views left to torch)."""
    ops = [op for op in module.walk() if op.name.startswith("kernel.")]
    for op in reversed(ops):
        block = op.parent_block()
        if block is not None and all(not r.uses for r in op.results):
            block.erase_op(op)


class MiragePart(torch.nn.Module):
    """A part of a torch graph run by mirage: inputs converted to the
    program's dtype (a boolean mask to 0/1), outputs back to torch's dtypes,
    views of inputs taken by torch.

    If its first call fails (the kernels do not build, say), the part says so
    on the log, with the reason in one line, and runs as torch from then on
    (``fallback``: the part's own torch ops)."""

    def __init__(self, run: Callable[..., Any], part: Part):
        super().__init__()
        from mirage_xdsl.semantics.interpreter import entry_function

        function = entry_function(part.captured.module)
        types = function.function_type.inputs.data
        self.program = function.sym_name.data
        self.device = part.results[0].meta["val"].device
        self.run = run
        self.input_dtypes = [torch_dtype(t.element_type) for t in types]  # type: ignore[attr-defined]
        self.outputs = part.outputs
        self.output_dtypes = [n.meta["val"].dtype for n in part.results]
        self.constants = part.captured.parameters
        self.stacked = part.stacked
        self.copies: dict[tuple[int, ...], tuple[Any, torch.Tensor]] = {}
        self.name = part.name
        self.fallback = part.graph_module
        self.fallback_dtypes = [traced_dtype(n) for n in part.inputs]
        """The dtypes the part's own torch ops take: its inputs may come
        converted to the program's (the Inductor glue converts a bool mask
        to the program's float once, before the part's op)."""
        self.state = "first"
        """``first`` until the first call, then ``mirage`` or ``torch``."""
        self.computed = computed_outputs(part.outputs)
        """The outputs the part makes (not views of its inputs, nor a second
        view of one result): what :meth:`compute` returns."""

    def device_of(self, inputs: Sequence[torch.Tensor]) -> torch.device:
        """Where a call on ``inputs`` makes its tensors: its first input's
        device, or the part's own for a part without inputs."""
        return inputs[0].device if inputs else self.device

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if records(inputs):  # its backward runs the part again as torch
            return differentiable(self._own, self.fallback, inputs)
        return self._call(*inputs)

    def _own(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """:meth:`_call`'s outputs, each copied where it is a view (of a
        program result, an input or a constant) or shares storage with an
        input or another output."""
        out = self._call(*inputs)
        return tuple(unshared([(o, o._is_view()) for o in out], inputs))

    def _call(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.attempt(lambda: self._mirage(inputs), lambda: self._torch(inputs))

    def _torch(self, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        """The part's own torch ops on ``inputs``, each in the dtype they
        take."""
        return tuple(
            self.fallback(
                *(
                    x if dtype is None or x.dtype == dtype else x.to(dtype)
                    for x, dtype in zip(inputs, self.fallback_dtypes, strict=True)
                )
            )
        )

    def attempt(self, mirage: Callable[[], Any], torch_ops: Callable[[], Any]) -> Any:
        """``mirage()``, or ``torch_ops()`` once the µGraph has failed: the
        first failure is one warning line, and the part runs as torch from
        then on."""
        if self.state == "mirage":
            return mirage()
        if self.state == "torch":
            return torch_ops()
        try:
            out = mirage()
        except Exception as e:
            why = error_line(e)
            log.warning(
                "mirage: %s runs as torch: its µGraph failed: %s", self.name, why
            )
            self.state = "torch"
            return torch_ops()
        self.state = "mirage"
        return out

    def compute(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        """The :attr:`computed` outputs of a call, falling back as ``forward``
        does; each contiguous and sharing no storage with an input, a
        constant or another output (two slices of one program result are
        views of one buffer)."""
        out = self.forward(*inputs)
        return unshared(
            [
                (out[i].contiguous(), self.outputs[i].source == "constant")
                for i in self.computed
            ],
            inputs,
        )

    def arguments(self, inputs: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
        """The program's arguments for ``inputs``: in its dtypes, contiguous,
        with the stacked sibling weights it takes after them."""
        args = [*inputs, *(self._stack(inputs, i) for i in self.stacked)]
        return [
            x.to(dtype).contiguous()
            for x, dtype in zip(args, self.input_dtypes, strict=False)
        ]

    def _mirage(self, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        results = self.run(*self.arguments(inputs))
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

    def _stack(
        self, inputs: tuple[torch.Tensor, ...], group: tuple[int, ...]
    ) -> torch.Tensor:
        """The inputs of ``group`` (sibling weights or biases) stacked, copied
        once while they are unchanged."""
        xs = [inputs[i] for i in group]
        key = [
            (x.data_ptr(), x._version, tuple(x.shape), x.dtype, x.device) for x in xs
        ]
        kept = self.copies.get(group)
        if kept is None or kept[0] != key:
            dtype = self.input_dtypes[len(inputs) + self.stacked.index(group)]
            copy = torch.cat([x.detach().to(dtype) for x in xs], dim=0)
            kept = (key, copy.contiguous())
            self.copies[group] = kept
        return kept[1]


def computed_outputs(outputs: list[Output]) -> list[int]:
    """The indices of the outputs a part makes: the first view of each
    program result, and each constant."""
    seen: set[int] = set()
    out = []
    for i, o in enumerate(outputs):
        if o.source == "constant" or (o.source == "program" and o.index not in seen):
            out.append(i)
        if o.source == "program":
            seen.add(o.index)
    return out


def unshared(
    tensors: list[tuple[torch.Tensor, bool]], inputs: Sequence[torch.Tensor]
) -> list[torch.Tensor]:
    """What an op may return: each tensor, copied where it shares storage
    with one of ``inputs`` or an earlier tensor, or where its flag says it is
    held elsewhere (a part's constant) or must be its own (a view)."""
    taken = {x.untyped_storage().data_ptr() for x in inputs}
    out = []
    for x, held in tensors:
        if held or x.untyped_storage().data_ptr() in taken:
            x = x.clone()
        taken.add(x.untyped_storage().data_ptr())
        out.append(x)
    return out
