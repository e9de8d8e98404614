"""Capture torch code as a kernel-dialect program.

:func:`capture` traces a function or ``nn.Module`` to an ATen graph
(:mod:`mirage_xdsl.torch.trace`) and converts it node by node with the
builder API. The conversion rules live in one table, :data:`ATEN_RULES`, keyed
by ATen op; each rule is a few lines that call the builder.

Some torch values have no kernel-dialect op of their own but are pieces of one:
``mean(x^2)`` and ``rsqrt`` of it are the inside of an RMSNorm, ``sigmoid(x)``
is half of a SiLU. Rules return those as :class:`Partial` values, which later
rules combine into the fused op (``x * rsqrt(mean(x^2))`` becomes
``kernel.rms_norm``). A partial value that reaches any other op is
*materialised* if it can be (``x^2`` becomes ``kernel.square``, a sigmoid
that is not half of a SiLU ``kernel.sigmoid``, an expand ``kernel.broadcast``),
otherwise the capture fails with a located one-line message naming the torch
op.

One program computes in one dtype (its *compute dtype*, the first floating
input's): module parameters and constants made at capture are converted to
it, and casts between float dtypes (``x.to(torch.float32)`` ...
``.to(input_dtype)``) compute nothing, since every kernel computes in fp32
and stores in the compute dtype.

The rules document the semantics the kernel dialect fixes (safe softmax,
RMSNorm's epsilon, constants, layouts, attention); ``docs/torch.md`` lists
them all.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx
from torch.export.graph_signature import InputKind
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, SSAValue

from mirage_xdsl.ir.builder import KernelGraph
from mirage_xdsl.ir.diagnostics import error_line
from mirage_xdsl.torch.complex_products import real_complex_products
from mirage_xdsl.torch.decompositions import decompose_composites
from mirage_xdsl.torch.nodes import (
    DTYPES,
    RMS_NORM_FORMS,
    CaptureError,
    node_shape,
    torch_dtype,
    unsupported,
    where_prefix,
)
from mirage_xdsl.torch.rules import (
    ATEN_RULES,
    IGNORED,
    MATERIALISED,
    Empty,
    Expanded,
    MaskedScores,
    MaxWithIndices,
    Parameter,
    Value,
    materialise_expand,
    no_rule_reason,
)
from mirage_xdsl.torch.rules.operands import parameter_of
from mirage_xdsl.torch.rules.siblings import Part
from mirage_xdsl.torch.trace import export, program_name


@dataclass
class Captured:
    """A captured program and what calling it needs besides the user's inputs.

    The function's inputs are the user's inputs, in order, followed by
    ``parameters`` (the module parameters and buffers the program reads).
    ``out_spec`` is the pytree structure of the torch code's result (one
    tensor, a tuple, ...), so a compiled program can return the same shape.
    """

    module: ModuleOp
    parameters: list[torch.Tensor] = field(default_factory=list)
    out_spec: Any = None
    out_dtypes: tuple[torch.dtype, ...] = ()
    """Each output's dtype in torch, where known: the program computes in one
    dtype, and a result cast to another at the end is converted on return."""


def capture(
    fn: Callable[..., Any] | torch.nn.Module, example_inputs: Sequence[torch.Tensor]
) -> ModuleOp:
    """The kernel-dialect program computing ``fn`` on inputs shaped like these."""
    return capture_program(fn, example_inputs).module


def capture_program(
    fn: Callable[..., Any] | torch.nn.Module, example_inputs: Sequence[torch.Tensor]
) -> Captured:
    """Like :func:`capture`, also returning the parameters the program reads."""
    names = input_names(fn, len(example_inputs))
    for i, x in enumerate(example_inputs):
        check_input(x, i, names[i])
    try:
        program = export(fn, example_inputs)
    except Exception as e:
        first = error_line(e)
        raise CaptureError(
            f"{where_prefix(None)}error: torch.export cannot trace "
            f"'{program_name(fn)}': {first}"
        ) from None
    decompose_composites(program.graph)
    real_complex_products(program.graph)
    floats = [DTYPES[x.dtype] for x in example_inputs if x.dtype in DTYPES]
    dtype = floats[0] if floats else DTYPES[torch.float32]
    converter = Converter(program.graph, program_name(fn), dtype)
    converter.bind_exported(program)
    module = converter.run()
    return Captured(
        module,
        converter.parameters,
        program.call_spec.out_spec,
        converter.output_dtypes,
    )


def input_names(fn: Callable[..., Any] | torch.nn.Module, count: int) -> list[str]:
    """The parameter names of ``fn`` (its ``forward``), for messages."""
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    try:
        params = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"#{i}" for i in range(count)]


def check_input(x: Any, index: int, name: str) -> None:
    """A one-line error, at the user's call, for an input mirage cannot take."""
    if not isinstance(x, torch.Tensor):
        raise CaptureError(
            f"{where_prefix(None)}error: input {index} ('{name}') is a "
            f"{type(x).__name__}; mirage captures functions of tensors only"
        )
    if x.dtype not in DTYPES and x.dtype != torch.bool:
        raise CaptureError(
            f"{where_prefix(None)}error: input {index} ('{name}') is {x.dtype}; "
            "mirage captures f16, bf16 and f32 tensors, and boolean masks "
            "(index and integer math "
            "stays torch: torch.compile(backend='mirage') runs it around the "
            "captured parts)"
        )
    if 0 in x.shape:
        raise CaptureError(
            f"{where_prefix(None)}error: input {index} ('{name}') is empty "
            f"(shape {tuple(x.shape)}); mirage captures tensors of at least one "
            "element along every dim"
        )


class Converter:
    """Walks an ATen graph once, building the kernel program."""

    def __init__(self, graph: fx.Graph, name: str, dtype: Attribute):
        self.fx_graph = graph
        self.graph = KernelGraph(name)
        self.dtype = dtype
        """The compute dtype: every input and constant of the program has it."""
        self.env: dict[fx.Node, Value] = {}
        self.parameters: list[torch.Tensor] = []
        """Parameters the program reads, in the order they became inputs."""
        self.fused_linears: dict[fx.Node, Part] = {}
        """Each sibling linear's slice of its fused projection (:mod:`.rules.siblings`)."""
        self.output_dtypes: tuple[torch.dtype, ...] = ()
        """Each output's torch dtype, once :meth:`run` has converted the graph."""
        self.computed: dict[Any, fx.Node] = {}
        """Each op and operands converted so far -> the first node that
        computed it (:meth:`_repeated`)."""

    def run(self) -> ModuleOp:
        """Convert every node; the program returns the graph's outputs."""
        outputs = self.walk()
        for out in outputs:
            self.graph.mark_output(self.value(out))
        vals = [out.meta.get("val") for out in outputs]
        if all(isinstance(v, torch.Tensor) for v in vals):
            self.output_dtypes = tuple(v.dtype for v in vals)
        return self.graph.module()

    def walk(self) -> list[fx.Node]:
        """Convert every node; the graph's output nodes."""
        outputs: list[Any] = []
        for node in self.fx_graph.nodes:
            if node.op == "call_function":
                self._convert(node)
            elif node.op == "output":
                outputs = list(fx.node.map_arg(node.args[0], lambda n: n))
        for out in outputs:
            if not isinstance(out, fx.Node):
                raise CaptureError(f"error: the function returns {out!r}, not a tensor")
        return outputs

    # --- inputs --------------------------------------------------------------

    def bind_exported(self, program: torch.export.ExportedProgram) -> None:
        """User inputs become inputs of their own dtype (a boolean mask, of the
        compute dtype, holding 0 and 1); parameters and buffers
        become :class:`Parameter` stand-ins, inputs when first used."""
        specs = {s.arg.name: s for s in program.graph_signature.input_specs}
        placeholders = [n for n in self.fx_graph.nodes if n.op == "placeholder"]
        for node in placeholders:
            if specs[node.name].kind == InputKind.USER_INPUT:
                # a boolean mask is passed as 0/1 in the compute dtype
                dtype = DTYPES.get(node.meta["val"].dtype, self.dtype)
                self.env[node] = self.graph.new_input(node_shape(node), dtype)
        for node in placeholders:
            spec = specs[node.name]
            if spec.kind == InputKind.USER_INPUT:
                continue
            tensor = program.state_dict.get(spec.target)
            if tensor is None:
                tensor = program.constants.get(spec.target)
            if not isinstance(tensor, torch.Tensor):
                raise CaptureError(
                    f"error: module input '{spec.target}' is not a tensor"
                )
            self.env[node] = Parameter(tensor.detach(), node)

    def bind_inputs(self) -> None:
        """Every placeholder becomes an input of the compute dtype (a boolean
        one holds 0 and 1: torch's own promotion of a mask in arithmetic)."""
        for node in self.fx_graph.nodes:
            if node.op == "placeholder":
                self.env[node] = self.graph.new_input(node_shape(node), self.dtype)

    # --- values --------------------------------------------------------------

    def value(self, node: fx.Node) -> SSAValue:
        """The SSA value of a node, materialising partial values and parameters."""
        v = self.env[node]
        if isinstance(v, SSAValue):
            return v
        if isinstance(v, Parameter):
            if v.value is None:
                v.value = self.constant(v.tensor)
            return v.value
        if isinstance(v, Expanded):
            self.env[node] = value = materialise_expand(self, v)
            return value
        if isinstance(v, Empty):
            raise unsupported(
                v.node,
                "an empty slice (only a concatenation, which drops it, reads one)",
            )
        if isinstance(v, MaskedScores):
            raise unsupported(
                v.node,
                "a fill of -inf read by anything but a softmax over the last dim "
                "(a 0/1 mask can select finite values only)",
            )
        if isinstance(v, MaxWithIndices):
            raise unsupported(
                v.node, "its (values, indices) pair as a tensor; take .values"
            )
        if v.kind in MATERIALISED:
            self.env[node] = value = getattr(self.graph, v.kind)(v.x)
            return value
        what = {
            "mean_square": "mean(x^2)",
            "rms": "sqrt(mean(x^2))",
            "inv_rms": "rsqrt(mean(x^2))",
        }[v.kind]
        raise unsupported(
            v.node, f"{what} is only supported as part of {RMS_NORM_FORMS}"
        )

    def constant(self, tensor: torch.Tensor) -> SSAValue:
        """A tensor known at capture (a parameter, sibling weights joined once, a
        selection matrix): a new trailing input of the compute dtype."""
        tensor = tensor.detach().to(torch_dtype(self.dtype)).contiguous()
        self.parameters.append(tensor)
        return self.graph.new_input(tuple(tensor.shape), self.dtype)

    def joinable(self, weight: Any, bias: Any) -> bool:
        """A 2-d parameter weight, and no bias or a parameter of one element
        per output: joined at capture, copying nothing at run time."""
        w = parameter_of(self, weight)
        if w is None or w.dim() != 2:
            return False
        b = parameter_of(self, bias)
        return bias is None or (b is not None and tuple(b.shape) == (w.shape[0],))

    def joined(self, weights: list[fx.Node], biases: list[Any]) -> SSAValue:
        """The parameters, concatenated once at capture (``[sum of out, in]``,
        as ``nn.Linear`` keeps each), read transposed."""
        tensors = [parameter_of(self, w) for w in weights]
        return self.graph.transpose(self.constant(torch.cat(tensors, dim=0)), 0, 1)

    def joined_bias(self, biases: list[fx.Node]) -> SSAValue:
        """The parameters, concatenated once at capture."""
        return self.constant(torch.cat([parameter_of(self, b) for b in biases]))

    def transposed(self, node: fx.Node) -> SSAValue:
        """The transpose of a 2-d value (an ``nn.Linear`` weight that is an
        input): ``kernel.transpose``."""
        return self.graph.transpose(self.value(node), 0, 1)

    def _repeated(self, node: fx.Node) -> fx.Node | None:
        """The node that already computed ``node``'s op on the same operands,
        if one did. Model code repeats pure ops (Cohere's LayerNorm writes
        ``hidden_states - mean`` twice, once in the variance), and the rules
        recognise a pattern such as ``d * rsqrt(mean(d^2))`` only when both
        ``d`` are one value. Every op a rule converts is pure, so the first
        one's value serves both."""
        try:
            key = (node.target, *_frozen(node.args), *_frozen(node.kwargs))
            first = self.computed.setdefault(key, node)
        except TypeError:  # an operand that cannot be compared (a tensor, a slice)
            return None
        return first if first is not node else None

    def _convert(self, node: fx.Node) -> None:
        rule = ATEN_RULES.get(getattr(node.target, "overloadpacket", node.target))
        if rule is None:
            if not node.users and node.target in IGNORED:
                return
            packet = getattr(node.target, "overloadpacket", node.target)
            raise unsupported(node, no_rule_reason(packet, "it has "))
        first = self._repeated(node)
        if first is not None:
            self.env[node] = self.env[first]
            return
        try:
            self.env[node] = rule(self, node, *node.args, **node.kwargs)
        except CaptureError:
            raise
        except Exception as e:  # a verifier's refusal of the op the rule built
            raise unsupported(
                node, str(e).splitlines()[0] if str(e) else repr(e)
            ) from None


def _frozen(value: Any) -> tuple[Any, ...]:
    """An op's arguments as a hashable key: lists and dicts as tuples (fx
    nodes hash by identity)."""
    if isinstance(value, dict):
        return (dict, *((k, *_frozen(v)) for k, v in sorted(value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value), *(_frozen(v) for v in value))
    if isinstance(value, torch.Tensor):
        raise TypeError("a tensor operand")
    return (value,)
