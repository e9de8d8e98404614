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
*materialised* if it can be (``x^2`` becomes ``kernel.square``), otherwise the
capture fails with a located one-line message naming the torch op.

Semantics the kernel dialect fixes, and that capture therefore adopts:

- softmax is ``exp(x) / sum(exp(x))``, without subtracting the row maximum:
  the workloads define attention this way (inputs are kept small);
- RMSNorm has unit weight and no epsilon (``x / sqrt(mean(x^2))``); the
  epsilon of ``F.rms_norm`` / ``nn.RMSNorm`` and of ``mean(x^2) + eps`` is
  dropped, and a weight is accepted only when it is all ones;
- reductions keep the reduced dim (``keepdim=True``) and element-wise operands
  have equal ranks, because the dialect has no reshape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx
from torch.export.graph_signature import InputKind
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, SSAValue

from mirage_xdsl import shapes
from mirage_xdsl.diagnostics import MirageError
from mirage_xdsl.graph import KernelGraph, bfloat16, float16, float32
from mirage_xdsl.torch.trace import export, program_name, source_location

aten = torch.ops.aten

DTYPES: dict[torch.dtype, Attribute] = {
    torch.float16: float16,
    torch.bfloat16: bfloat16,
    torch.float32: float32,
}


class CaptureError(MirageError):
    """Torch code that has no kernel-dialect equivalent; one located line."""


@dataclass(frozen=True)
class Partial:
    """A torch value that exists in the kernel dialect only inside a fused op.

    ``kind`` is one of ``square`` (x^2), ``mean_square`` (mean of x^2 over the
    last dim), ``rms`` (its square root), ``inv_rms`` (its reciprocal square
    root) and ``sigmoid``; ``x`` is the value they are computed from and
    ``node`` the torch node that produced this piece, for error messages.
    """

    kind: str
    x: SSAValue
    node: fx.Node


@dataclass
class Parameter:
    """A module parameter or buffer: becomes a function input when first used."""

    tensor: torch.Tensor
    node: fx.Node
    value: SSAValue | None = None


Value = SSAValue | Partial | Parameter


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
        self.parameters: list[Parameter] = []

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
        used = [p.tensor for p in self.parameters if p.value is not None]
        return Captured(module, used, self.program.call_spec.out_spec)

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
            param = Parameter(tensor.detach(), node)
            self.parameters.append(param)
            self.env[node] = param

    # --- values --------------------------------------------------------------

    def value(self, node: fx.Node) -> SSAValue:
        """The SSA value of a node, materialising partial values and parameters."""
        v = self.env[node]
        if isinstance(v, SSAValue):
            return v
        if isinstance(v, Parameter):
            if v.value is None:
                v.value = self.graph.new_input(node_shape(node), node_dtype(node))
            return v.value
        if v.kind == "square":
            self.env[node] = square = self.graph.square(v.x)
            return square
        what = {
            "mean_square": "mean(x^2)",
            "rms": "sqrt(mean(x^2))",
            "inv_rms": "rsqrt(mean(x^2))",
            "sigmoid": "sigmoid(x)",
        }[v.kind]
        use = "x * sigmoid(x) (SiLU)" if v.kind == "sigmoid" else RMS_NORM_FORMS
        raise unsupported(v.node, f"{what} is only supported as part of {use}")

    def _convert(self, node: fx.Node) -> None:
        rule = ATEN_RULES.get(node.target.overloadpacket)  # type: ignore[union-attr]
        if rule is None:
            if not node.users and node.target in IGNORED:
                return
            raise unsupported(node, "it has no kernel-dialect equivalent")
        self.env[node] = rule(self, node, *node.args, **node.kwargs)


RMS_NORM_FORMS = (
    "an RMSNorm over the last dim: x * rsqrt(mean(x^2)) or x / sqrt(mean(x^2))"
)


def op_name(node: fx.Node) -> str:
    target = node.target
    packet = getattr(target, "overloadpacket", None)
    return f"aten.{packet.__name__}" if packet is not None else str(target)


def unsupported(node: fx.Node, why: str) -> CaptureError:
    """``file:line:col: error: torch op 'aten.X' ...: why (in `source`)``."""
    loc = source_location(node)
    where = f"{loc}: " if loc else ""
    source = f" (in `{loc.text}`)" if loc and loc.text else ""
    return CaptureError(
        f"{where}error: torch op '{op_name(node)}' is not supported: {why}{source}"
    )


def node_meta(node: fx.Node) -> torch.Tensor:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        raise unsupported(node, "its value is not a tensor")
    return val


def node_shape(node: fx.Node) -> tuple[int, ...]:
    shape = node_meta(node).shape
    if not all(isinstance(d, int) for d in shape):
        raise unsupported(node, "its shape is dynamic; capture static shapes")
    return tuple(shape)


def node_dtype(node: fx.Node) -> Attribute:
    dtype = node_meta(node).dtype
    if dtype not in DTYPES:
        raise unsupported(node, f"dtype {dtype} (mirage supports f16, bf16, f32)")
    return DTYPES[dtype]


def last_dim_only(node: fx.Node, dims: Any, rank: int) -> bool:
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    return [d % rank for d in dims] == [rank - 1]


# --- rules ---------------------------------------------------------------------

Rule = Callable[..., Value]


def _tensor_operands(c: Converter, node: fx.Node, *args: Any) -> list[SSAValue]:
    """Materialised tensor operands; scalars are refused (no constants exist)."""
    values = []
    for a in args:
        if not isinstance(a, fx.Node):
            raise unsupported(
                node,
                f"scalar operand {a!r}; the kernel dialect has no constants",
            )
        values.append(c.value(a))
    return values


def _check(node: fx.Node, rule: Callable[..., Any], *shape_args: Any) -> None:
    try:
        rule(*shape_args)
    except shapes.ShapeError as e:
        raise unsupported(node, str(e)) from None


def _partial(c: Converter, a: Any, *kinds: str) -> Partial | None:
    v = c.env.get(a) if isinstance(a, fx.Node) else None
    return v if isinstance(v, Partial) and v.kind in kinds else None


def _is_x_of(c: Converter, a: Any, partial: Partial) -> bool:
    """Whether ``a`` is the value ``partial`` was computed from."""
    if not isinstance(a, fx.Node) or isinstance(c.env.get(a), Partial):
        return False
    return c.value(a) is partial.x


def matmul(c: Converter, node: fx.Node, a: Any, b: Any) -> Value:
    x, y = _tensor_operands(c, node, a, b)
    _check(node, shapes.matmul, node_shape(a), node_shape(b))
    return c.graph.matmul(x, y)


def elementwise(kind: str) -> Rule:
    def rule(c: Converter, node: fx.Node, a: Any, b: Any, **kw: Any) -> Value:
        if kw.get("alpha", 1) != 1 or kw.get("rounding_mode") is not None:
            raise unsupported(node, f"options {kw}")
        x, y = _tensor_operands(c, node, a, b)
        _check(node, shapes.broadcast, node_shape(a), node_shape(b))
        return getattr(c.graph, kind)(x, y)

    return rule


def unary(kind: str) -> Rule:
    def rule(c: Converter, node: fx.Node, a: Any) -> Value:
        (x,) = _tensor_operands(c, node, a)
        return getattr(c.graph, kind)(x)

    return rule


def add(c: Converter, node: fx.Node, a: Any, b: Any, **kw: Any) -> Value:
    """``mean(x^2) + eps``: the epsilon of an RMSNorm, dropped (see module doc)."""
    ms = _partial(c, a, "mean_square")
    if ms is not None and isinstance(b, int | float) and kw.get("alpha", 1) == 1:
        return ms
    return elementwise("add")(c, node, a, b, **kw)


def mul(c: Converter, node: fx.Node, a: Any, b: Any) -> Value:
    """``x * rsqrt(mean(x^2))`` is RMSNorm, ``x * sigmoid(x)`` SiLU, ``x * x`` x^2."""
    for p, q in ((a, b), (b, a)):
        part = _partial(c, q, "inv_rms", "sigmoid")
        if part is not None and _is_x_of(c, p, part):
            f = c.graph.rms_norm if part.kind == "inv_rms" else c.graph.silu
            return f(part.x)
    if isinstance(a, fx.Node) and a is b:
        return Partial("square", c.value(a), node)
    return elementwise("mul")(c, node, a, b)


def div(c: Converter, node: fx.Node, a: Any, b: Any, **kw: Any) -> Value:
    """``x / sqrt(mean(x^2))`` is RMSNorm."""
    part = _partial(c, b, "rms")
    if part is not None and _is_x_of(c, a, part) and not kw:
        return c.graph.rms_norm(part.x)
    return elementwise("div")(c, node, a, b, **kw)


def pow_(c: Converter, node: fx.Node, a: Any, exponent: Any) -> Value:
    if exponent != 2:
        raise unsupported(node, f"exponent {exponent!r} (only x^2 is supported)")
    return Partial("square", c.value(a), node)


def square(c: Converter, node: fx.Node, a: Any) -> Value:
    return Partial("square", c.value(a), node)


def mean(c: Converter, node: fx.Node, a: Any, dims: Any = None, keepdim=False, **kw):
    sq = _partial(c, a, "square")
    if sq is None or not keepdim or not last_dim_only(node, dims, len(node_shape(a))):
        raise unsupported(node, f"mean is only supported inside {RMS_NORM_FORMS}")
    return Partial("mean_square", sq.x, node)


def sqrt(c: Converter, node: fx.Node, a: Any) -> Value:
    ms = _partial(c, a, "mean_square")
    return Partial("rms", ms.x, node) if ms else unary("sqrt")(c, node, a)


def rsqrt(c: Converter, node: fx.Node, a: Any) -> Value:
    ms = _partial(c, a, "mean_square")
    if ms is None:
        raise unsupported(node, f"rsqrt is only supported inside {RMS_NORM_FORMS}")
    return Partial("inv_rms", ms.x, node)


def sigmoid(c: Converter, node: fx.Node, a: Any) -> Value:
    return Partial("sigmoid", c.value(a), node)


def reduce_sum(
    c: Converter, node: fx.Node, a: Any, dims: Any = None, keepdim=False, **kw: Any
) -> Value:
    rank = len(node_shape(a))
    if dims is None or not keepdim or kw.get("dtype") is not None:
        raise unsupported(
            node, "sum needs explicit dims and keepdim=True (the dialect keeps them)"
        )
    (x,) = _tensor_operands(c, node, a)
    for d in sorted({d % rank for d in ([dims] if isinstance(dims, int) else dims)}):
        x = c.graph.reduction(x, d)
    return x


def softmax(c: Converter, node: fx.Node, a: Any, dim: int, *rest: Any) -> Value:
    """``exp(x) / sum(exp(x))`` over ``dim`` (no max subtraction; see module doc)."""
    if rest and rest[0] not in (None, False, node_meta(a).dtype):
        raise unsupported(node, "softmax with a dtype change")
    (x,) = _tensor_operands(c, node, a)
    e = c.graph.exp(x)
    return c.graph.div(e, c.graph.reduction(e, dim % len(node_shape(a))))


def rms_norm(
    c: Converter,
    node: fx.Node,
    a: Any,
    normalized_shape: Sequence[int],
    weight: Any = None,
    eps: Any = None,
) -> Value:
    """``F.rms_norm`` / ``nn.RMSNorm`` over the last dim, with unit weight."""
    if list(normalized_shape) != [node_shape(a)[-1]]:
        raise unsupported(node, "RMSNorm over more than the last dim")
    if weight is not None:
        w = c.env.get(weight)
        if not (isinstance(w, Parameter) and bool(torch.all(w.tensor == 1))):
            raise unsupported(node, "RMSNorm with a weight that is not all ones")
    (x,) = _tensor_operands(c, node, a)
    return c.graph.rms_norm(x)


def identity(c: Converter, node: fx.Node, a: Any, *rest: Any, **kw: Any) -> Value:
    """Copies, aliases and casts to the same dtype compute nothing."""
    if node_meta(node).dtype != node_meta(a).dtype:
        raise unsupported(node, "a dtype conversion (mirage keeps one dtype)")
    if node_shape(node) != node_shape(a):
        raise unsupported(node, "a shape change (the kernel dialect has no reshape)")
    return c.env[a]


ATEN_RULES: dict[Any, Rule] = {
    aten.matmul: matmul,
    aten.mm: matmul,
    aten.bmm: matmul,
    aten.add: add,
    aten.mul: mul,
    aten.div: div,
    aten.exp: unary("exp"),
    aten.silu: unary("silu"),
    aten.sigmoid: sigmoid,
    aten.sqrt: sqrt,
    aten.rsqrt: rsqrt,
    aten.pow: pow_,
    aten.square: square,
    aten.mean: mean,
    aten.sum: reduce_sum,
    aten.softmax: softmax,
    aten._softmax: softmax,
    aten.rms_norm: rms_norm,
    aten.clone: identity,
    aten.alias: identity,
    aten.detach: identity,
    aten.contiguous: identity,
    aten.to: identity,
    aten._to_copy: identity,
}
"""ATen op (overload packet) -> conversion rule."""

IGNORED = {aten._assert_tensor_metadata.default}
"""Checks torch.export inserts; they compute nothing."""
