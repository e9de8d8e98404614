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
that is not half of a SiLU ``kernel.sigmoid``), otherwise the
capture fails with a located one-line message naming the torch op.

Semantics the kernel dialect fixes, and that capture therefore adopts:

- softmax is ``exp(x - max(x)) / sum(exp(x - max(x)))`` (``kernel.reduce_max``
  of the row subtracted), finite at any input scale; the verifier proves it
  equal to the workloads' ``exp(x) / sum(exp(x))``;
- ``torch.amax(x, dims, keepdim=True)`` and the values of
  ``torch.max(x, dim, keepdim=True)`` are ``kernel.reduce_max``; the indices
  of ``max`` are refused;
- RMSNorm is ``x / sqrt(mean(x^2) + eps)``: the epsilon of ``F.rms_norm`` /
  ``nn.RMSNorm`` (fp32's machine epsilon when None, as in torch) and of
  ``mean(x^2) + eps`` becomes ``kernel.rms_norm``'s ``eps``, and a weight other
  than all ones becomes a broadcast multiply;
- a Python number is a constant only in ``x * c``, ``c * x``, ``x / c``
  (``kernel.mul_scalar``), ``x + c``, ``c + x``, ``x - c`` and ``c - x``
  (``kernel.add_scalar``, of ``kernel.neg(x)`` for ``c - x``); ``c / x`` is
  refused;
- reductions keep the reduced dim (``keepdim=True``) and element-wise operands
  have equal ranks, as the dialect's ops do;
- ``F.scaled_dot_product_attention`` (no mask, no dropout) is
  ``softmax(q k^T * scale) v`` with the safe softmax; grouped heads
  (``enable_gqa``) stack each group's queries as rows.

Module parameters and buffers are constants, so shape changes of them are
applied once, at capture: a transposed, reshaped or expanded weight
(``x @ W.T``, ``nn.Linear``'s ``[out, in]`` weight, a bias shaped to
broadcast) becomes an input holding the changed copy. On a computed tensor a
view or reshape becomes ``kernel.reshape`` and a transpose or permute
``kernel.transpose``; an expand is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx
from torch.export.graph_signature import InputKind
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from mirage_xdsl.ir.builder import KernelGraph
from mirage_xdsl.torch.nodes import (
    DTYPES,
    RMS_NORM_FORMS,
    CaptureError,
    node_dtype,
    node_shape,
    unsupported,
)
from mirage_xdsl.torch.rules import (
    ATEN_RULES,
    IGNORED,
    MATERIALISED,
    MaxWithIndices,
    Parameter,
    Value,
)
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


def capture(
    fn: Callable[..., Any] | torch.nn.Module, example_inputs: Sequence[torch.Tensor]
) -> ModuleOp:
    """The kernel-dialect program computing ``fn`` on inputs shaped like these."""
    return capture_program(fn, example_inputs).module


def capture_program(
    fn: Callable[..., Any] | torch.nn.Module, example_inputs: Sequence[torch.Tensor]
) -> Captured:
    """Like :func:`capture`, also returning the parameters the program reads."""
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise CaptureError(
                f"error: example input {i} is a {type(x).__name__}; "
                "mirage captures functions of tensors only"
            )
    program = export(fn, example_inputs)
    return Converter(program, program_name(fn)).run()


class Converter:
    """Walks an exported ATen graph once, building the kernel program."""

    def __init__(self, program: torch.export.ExportedProgram, name: str):
        self.program = program
        self.graph = KernelGraph(name)
        self.env: dict[fx.Node, Value] = {}
        self.parameters: list[torch.Tensor] = []
        """Parameters the program reads, in the order they became inputs."""

    def run(self) -> Captured:
        placeholders = [n for n in self.program.graph.nodes if n.op == "placeholder"]
        self._bind_inputs(placeholders)
        outputs: list[fx.Node] = []
        for node in self.program.graph.nodes:
            if node.op == "call_function":
                self._convert(node)
            elif node.op == "output":
                outputs = list(fx.node.map_arg(node.args[0], lambda n: n))
        for out in outputs:
            if not isinstance(out, fx.Node):
                raise CaptureError(f"error: the function returns {out!r}, not a tensor")
            self.graph.mark_output(self.value(out))
        module = self.graph.module()
        return Captured(module, self.parameters, self.program.call_spec.out_spec)

    # --- inputs --------------------------------------------------------------

    def _bind_inputs(self, placeholders: list[fx.Node]) -> None:
        specs = {s.arg.name: s for s in self.program.graph_signature.input_specs}
        user = [n for n in placeholders if specs[n.name].kind == InputKind.USER_INPUT]
        for node in user:
            self.env[node] = self.graph.new_input(node_shape(node), node_dtype(node))
        for node in placeholders:
            spec = specs[node.name]
            if spec.kind == InputKind.USER_INPUT:
                continue
            tensor = self.program.state_dict.get(spec.target)
            if tensor is None:
                tensor = self.program.constants.get(spec.target)
            if not isinstance(tensor, torch.Tensor):
                raise CaptureError(
                    f"error: module input '{spec.target}' is not a tensor"
                )
            self.env[node] = Parameter(tensor.detach(), node)

    # --- values --------------------------------------------------------------

    def value(self, node: fx.Node) -> SSAValue:
        """The SSA value of a node, materialising partial values and parameters."""
        v = self.env[node]
        if isinstance(v, SSAValue):
            return v
        if isinstance(v, Parameter):
            if v.value is None:
                v.value = self.graph.new_input(node_shape(node), node_dtype(node))
                self.parameters.append(v.tensor)
            return v.value
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
        """A tensor computed at capture from parameters (a transposed weight, a
        bias shaped to broadcast): a new trailing input, passed like a parameter."""
        if tensor.dtype not in DTYPES:
            raise CaptureError(
                f"error: a parameter of dtype {tensor.dtype} "
                "(mirage supports f16, bf16, f32)"
            )
        self.parameters.append(tensor)
        return self.graph.new_input(tuple(tensor.shape), DTYPES[tensor.dtype])

    def _convert(self, node: fx.Node) -> None:
        rule = ATEN_RULES.get(getattr(node.target, "overloadpacket", node.target))
        if rule is None:
            if not node.users and node.target in IGNORED:
                return
            raise unsupported(node, "it has no kernel-dialect equivalent")
        self.env[node] = rule(self, node, *node.args, **node.kwargs)
