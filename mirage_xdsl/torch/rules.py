"""Conversion rules: one function per ATen op, building kernel-dialect ops.

:data:`ATEN_RULES` maps each supported ATen op to its rule. A rule receives
the converter, the node and the node's arguments (converted nodes stay fx
nodes; :meth:`Converter.value` gives their SSA value) and returns the node's
value: an SSA value, or a :class:`Partial` piece of a fused op (see
:mod:`mirage_xdsl.torch.capture`).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import fx
from xdsl.ir import SSAValue

from mirage_xdsl.dialects import shapes
from mirage_xdsl.ir.builder import KernelGraph
from mirage_xdsl.ops import OPS, Form
from mirage_xdsl.torch.nodes import (
    RMS_NORM_FORMS,
    aten,
    last_dim_only,
    node_meta,
    node_shape,
    unsupported,
)


@dataclass(frozen=True)
class Partial:
    """A torch value that exists in the kernel dialect only inside a fused op.

    ``kind`` is one of ``square`` (x^2), ``mean_square`` (mean of x^2 over the
    last dim), ``rms`` (its square root), ``inv_rms`` (its reciprocal square
    root) and ``sigmoid``; ``x`` is the value they are computed from and
    ``node`` the torch node that produced this piece, for error messages.
    ``eps`` is the constant added to ``mean(x^2)``, kept by the rms_norm.
    """

    kind: str
    x: SSAValue
    node: fx.Node
    eps: float = 0.0


@dataclass
class Parameter:
    """A module parameter or buffer: becomes a function input when first used."""

    tensor: torch.Tensor
    node: fx.Node
    value: SSAValue | None = None


@dataclass(frozen=True)
class MaxWithIndices:
    """The ``(values, indices)`` pair of ``torch.max(x, dim)``: only its values
    (``[0]``, ``.values``) have a kernel-dialect op, ``kernel.reduce_max``."""

    values: SSAValue
    node: fx.Node


Value = SSAValue | Partial | Parameter | MaxWithIndices


class Converter(Protocol):
    """What a rule reads of the walk that calls it (:class:`mirage_xdsl.torch.capture.Converter`)."""

    graph: KernelGraph
    env: dict[fx.Node, Value]

    def value(self, node: fx.Node) -> SSAValue:
        """The SSA value of a converted node."""
        ...

    def constant(self, tensor: torch.Tensor) -> SSAValue:
        """A tensor computed at capture, passed in as a trailing input."""
        ...


Rule = Callable[..., Value]


def _refuse_scalars(node: fx.Node, *args: Any) -> None:
    for a in args:
        if not isinstance(a, fx.Node):
            raise unsupported(
                node,
                f"scalar operand {a!r} here (constants exist only as x * c, "
                "x / c, x + c, x - c and c - x)",
            )


def _scalar(a: Any) -> float | None:
    """A Python number operand as a float; None for tensors (and bools)."""
    if isinstance(a, int | float) and not isinstance(a, bool):
        return float(a)
    return None


def _tensor_and_scalar(a: Any, b: Any, commutes: bool) -> tuple[Any, float] | None:
    """``(tensor node, constant)`` of ``x (op) c`` (or ``c (op) x`` when the op
    commutes); None when neither form applies."""
    if isinstance(a, fx.Node) and (c := _scalar(b)) is not None:
        return a, c
    if commutes and isinstance(b, fx.Node) and (c := _scalar(a)) is not None:
        return b, c
    return None


def _tensor_operands(c: Converter, node: fx.Node, *args: Any) -> list[SSAValue]:
    """Materialised tensor operands; a Python number is refused here (the rules
    that accept constants match them first)."""
    _refuse_scalars(node, *args)
    return [c.value(a) for a in args]


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


def _parameter(c: Converter, a: Any) -> torch.Tensor | None:
    """The tensor of a module parameter or buffer operand, else None."""
    v = c.env.get(a) if isinstance(a, fx.Node) else None
    return v.tensor if isinstance(v, Parameter) else None


def _batched(weight: torch.Tensor, batch: Sequence[int]) -> torch.Tensor:
    """``weight`` repeated over the batch dims of the operand it multiplies.

    The dialect's matmul wants equal batch dims on both sides; a weight shared
    by every batch entry is therefore passed once per entry.
    """
    return weight.expand(*batch, *weight.shape[-2:]).contiguous()


def matmul(c: Converter, node: fx.Node, a: Any, b: Any) -> Value:
    """``a @ b``; a 2-d parameter against a batched operand is batched at capture."""
    _refuse_scalars(node, a, b)
    sa, sb = node_shape(a), node_shape(b)
    if len(sb) == 2 and len(sa) > 2 and (w := _parameter(c, b)) is not None:
        return c.graph.matmul(c.value(a), c.constant(_batched(w, sa[:-2])))
    if len(sa) == 2 and len(sb) > 2 and (w := _parameter(c, a)) is not None:
        return c.graph.matmul(c.constant(_batched(w, sb[:-2])), c.value(b))
    _check(node, shapes.matmul, sa, sb)
    return c.graph.matmul(c.value(a), c.value(b))


def linear(c: Converter, node: fx.Node, x: Any, w: Any, b: Any = None) -> Value:
    """``F.linear`` / ``nn.Linear``: ``x @ W.T + b``, with the ``[out, in]``
    weight transposed (and the bias shaped to broadcast) once, at capture."""
    weight = _parameter(c, w)
    if weight is None:
        raise unsupported(
            node,
            "a weight that is not a module parameter or buffer (the rule "
            "transposes the weight, and repeats it over the batch dims, at capture)",
        )
    (value,) = _tensor_operands(c, node, x)
    batch = node_shape(x)[:-2]
    y = c.graph.matmul(value, c.constant(_batched(weight.t(), batch)))
    if b is None:
        return y
    bias = _parameter(c, b)
    if bias is None:
        raise unsupported(node, "a bias that is not a module parameter or buffer")
    rank = len(node_shape(node))
    return c.graph.add(y, c.constant(bias.reshape((1,) * (rank - 1) + (-1,))))


def shape_change(c: Converter, node: fx.Node, a: Any, *args: Any, **kw: Any) -> Value:
    """A transpose, permute, reshape or expand of a parameter is applied to the
    parameter at capture; of a computed tensor, it becomes layout ops
    (:func:`layout_change`)."""
    tensor = _parameter(c, a)
    if tensor is not None:
        return Parameter(node.target(tensor, *args, **kw).contiguous(), node)
    if node_shape(node) == node_shape(a) and node.target not in SWAPS:
        return c.env[a]  # a view that changes nothing
    return layout_change(c, node, a, *args)


SWAPS = {aten.t.default, aten.numpy_T.default, aten.transpose.int, aten.permute.default}
"""Shape changes that move elements (the others keep the row-major order)."""


def layout_change(c: Converter, node: fx.Node, a: Any, *args: Any) -> Value:
    """``view``/``reshape``/``unsqueeze``/``flatten`` become ``kernel.reshape``;
    ``transpose``, ``t`` and ``permute`` become ``kernel.transpose`` (a
    permutation, one swap of two dims after another); ``expand`` of a computed
    tensor is refused (the dialect broadcasts only inside element-wise ops)."""
    x = c.value(a)
    rank = len(node_shape(a))
    if node.target in SWAPS:
        if node.target == aten.permute.default:
            order = [d % rank for d in args[0]]
        else:
            d0, d1 = (args[0], args[1]) if args else (0, rank - 1)
            order = list(range(rank))
            order[d0 % rank], order[d1 % rank] = order[d1 % rank], order[d0 % rank]
        for i, j in swaps(order):
            x = c.graph.transpose(x, i, j)
        return x
    if node.target == aten.expand.default:
        raise unsupported(
            node,
            "an expand of a computed tensor (broadcast it by an element-wise op, "
            "or pass grouped heads to scaled_dot_product_attention with "
            "enable_gqa=True)",
        )
    return c.graph.reshape(x, node_shape(node))


def swaps(order: Sequence[int]) -> list[tuple[int, int]]:
    """Swaps of two dims that, applied in turn, permute dims into ``order``
    (result dim ``i`` is source dim ``order[i]``): a selection sort."""
    current = list(range(len(order)))
    out = []
    for i, want in enumerate(order):
        j = current.index(want)
        if j != i:
            current[i], current[j] = current[j], current[i]
            out.append((i, j))
    return out


def sdpa(
    c: Converter,
    node: fx.Node,
    q: Any,
    k: Any,
    v: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Value:
    """``F.scaled_dot_product_attention`` without mask or dropout:
    ``softmax(q @ k^T * scale) @ v`` with the default scale ``1/sqrt(d)`` and
    the safe softmax. Grouped heads (``enable_gqa``, ``h`` query heads over
    ``g`` key heads) stack each group's queries as rows,
    ``[.., h, l, d] -> [.., g, (h/g) l, d]``, so one batched matmul per key
    head serves its whole group."""
    if attn_mask is not None or is_causal:
        raise unsupported(node, "an attention mask or is_causal (no masking op)")
    if dropout_p:
        raise unsupported(node, f"dropout_p={dropout_p} (no random op)")
    sq, sk, sv = node_shape(q), node_shape(k), node_shape(v)
    if len(sq) < 3 or not len(sq) == len(sk) == len(sv):
        raise unsupported(node, "query, key and value of different ranks, or < 3")
    heads, kv_heads = sq[-3], sk[-3]
    if heads != kv_heads and not (enable_gqa and heads % kv_heads == 0):
        raise unsupported(
            node,
            f"{heads} query heads over {kv_heads} key heads "
            "(grouped heads need enable_gqa=True and a whole number of groups)",
        )
    rows = (heads // kv_heads) * sq[-2]
    query = c.value(q)
    if heads != kv_heads:
        query = c.graph.reshape(query, (*sq[:-3], kv_heads, rows, sq[-1]))
    rank = len(sq)
    scores = c.graph.matmul(query, c.graph.transpose(c.value(k), rank - 2, rank - 1))
    scores = c.graph.mul_scalar(scores, scale if scale else 1.0 / math.sqrt(sq[-1]))
    e = c.graph.exp(
        c.graph.add(scores, c.graph.neg(c.graph.reduce_max(scores, rank - 1)))
    )
    out = c.graph.matmul(c.graph.div(e, c.graph.reduction(e, rank - 1)), c.value(v))
    if heads != kv_heads:
        out = c.graph.reshape(out, (*sq[:-1], sv[-1]))
    return out


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


def _plus_constant(c: Converter, node: fx.Node, x: fx.Node, k: float) -> Value:
    """``x + k``: inside an RMSNorm (``mean(x^2) + k``) it is the epsilon,
    elsewhere ``add_scalar``."""
    ms = _partial(c, x, "mean_square")
    if ms is not None:
        return Partial("mean_square", ms.x, node, ms.eps + k)
    return c.graph.add_scalar(c.value(x), k)


def add(c: Converter, node: fx.Node, a: Any, b: Any, **kw: Any) -> Value:
    """``mean(x^2) + eps`` is the inside of an RMSNorm, which keeps ``eps``;
    ``x + c`` and ``c + x`` with a Python number are ``add_scalar``."""
    if kw.get("alpha", 1) != 1:
        raise unsupported(node, f"options {kw}")
    scalar = _tensor_and_scalar(a, b, commutes=True)
    if scalar is not None:
        return _plus_constant(c, node, *scalar)
    return elementwise("add")(c, node, a, b, **kw)


def sub(c: Converter, node: fx.Node, a: Any, b: Any, **kw: Any) -> Value:
    """``x - c`` with a Python number is ``add_scalar(x, -c)`` (inside an
    RMSNorm, ``eps - c``), ``c - x`` is ``add_scalar(neg(x), c)``, and ``a - b``
    of two tensors ``a + (-b)``: the dialect has negation, not subtraction."""
    if kw.get("alpha", 1) != 1:
        raise unsupported(node, f"options {kw}")
    scalar = _tensor_and_scalar(a, b, commutes=False)
    if scalar is not None:
        x, k = scalar
        return _plus_constant(c, node, x, -k)
    k = _scalar(a)
    if k is not None and isinstance(b, fx.Node):
        return c.graph.add_scalar(c.graph.neg(c.value(b)), k)
    x, y = _tensor_operands(c, node, a, b)
    _check(node, shapes.broadcast, node_shape(a), node_shape(b))
    return c.graph.add(x, c.graph.neg(y))


def rsub(c: Converter, node: fx.Node, a: Any, b: Any, alpha: Any = 1) -> Value:
    """``torch.rsub(x, c)`` is ``c - x``: :func:`sub` with the operands swapped
    (``aten.rsub`` takes its ``alpha`` by position)."""
    return sub(c, node, b, a, alpha=alpha)


def mul(c: Converter, node: fx.Node, a: Any, b: Any) -> Value:
    """``x * rsqrt(mean(x^2))`` is RMSNorm, ``x * sigmoid(x)`` SiLU, ``x * x``
    x^2, ``x * c`` and ``c * x`` with a Python number ``mul_scalar``."""
    for p, q in ((a, b), (b, a)):
        part = _partial(c, q, "inv_rms", "sigmoid")
        if part is not None and _is_x_of(c, p, part):
            if part.kind == "inv_rms":
                return c.graph.rms_norm(part.x, part.eps)
            return c.graph.silu(part.x)
    if isinstance(a, fx.Node) and a is b:
        return Partial("square", c.value(a), node)
    scalar = _tensor_and_scalar(a, b, commutes=True)
    if scalar is not None:
        return c.graph.mul_scalar(c.value(scalar[0]), scalar[1])
    return elementwise("mul")(c, node, a, b)


def div(c: Converter, node: fx.Node, a: Any, b: Any, **kw: Any) -> Value:
    """``x / sqrt(mean(x^2))`` is RMSNorm; ``x / c`` with a nonzero Python
    number is ``mul_scalar(x, 1 / c)``; ``c / x`` is refused."""
    part = _partial(c, b, "rms")
    if part is not None and _is_x_of(c, a, part) and not kw:
        return c.graph.rms_norm(part.x, part.eps)
    scalar = _tensor_and_scalar(a, b, commutes=False)
    if scalar is not None and not kw:
        if scalar[1] == 0:
            raise unsupported(node, "division by the constant 0")
        return c.graph.mul_scalar(c.value(scalar[0]), 1.0 / scalar[1])
    if _scalar(a) is not None:
        raise unsupported(node, "c / x (the kernel dialect has x / c only)")
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
    return Partial("rms", ms.x, node, ms.eps) if ms else unary("sqrt")(c, node, a)


def rsqrt(c: Converter, node: fx.Node, a: Any) -> Value:
    ms = _partial(c, a, "mean_square")
    if ms is None:
        raise unsupported(node, f"rsqrt is only supported inside {RMS_NORM_FORMS}")
    return Partial("inv_rms", ms.x, node, ms.eps)


def sigmoid(c: Converter, node: fx.Node, a: Any) -> Value:
    """Half of a SiLU if ``mul`` meets it with its argument; any other use
    materialises it as ``kernel.sigmoid`` (:data:`MATERIALISED`)."""
    return Partial("sigmoid", c.value(a), node)


def gelu(c: Converter, node: fx.Node, a: Any, approximate: str = "none") -> Value:
    """``F.gelu(x)`` is the exact (erf) GELU, ``approximate="tanh"`` the other."""
    kinds = {"none": "gelu_erf", "tanh": "gelu"}
    if approximate not in kinds:
        raise unsupported(node, f"GELU approximation {approximate!r}")
    return unary(kinds[approximate])(c, node, a)


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


def _dims(node: fx.Node, a: Any, dims: Any, keepdim: Any, what: str) -> list[int]:
    """The reduced dims of a max over ``a``: explicit, kept (the dialect keeps
    reduced dims with size 1), each once and counted from the front."""
    rank = len(node_shape(a))
    listed = [dims] if isinstance(dims, int) else list(dims or [])
    if not listed or not keepdim:
        raise unsupported(
            node,
            f"{what} needs explicit dims and keepdim=True (the dialect keeps them)",
        )
    return sorted({d % rank for d in listed})


def amax(c: Converter, node: fx.Node, a: Any, dims: Any = (), keepdim=False) -> Value:
    """``torch.amax(x, dims, keepdim=True)``: one ``reduce_max`` per dim (the
    maximum over several dims is the maximum of maxima)."""
    reduced = _dims(node, a, dims, keepdim, "amax")
    (x,) = _tensor_operands(c, node, a)
    for d in reduced:
        x = c.graph.reduce_max(x, d)
    return x


def max_(c: Converter, node: fx.Node, a: Any, *args: Any, **kw: Any) -> Value:
    """``torch.max(x, dim, keepdim=True)`` / ``x.max(dim=...)``: its values are
    ``kernel.reduce_max``; ``torch.max(x)`` over everything and the
    element-wise ``torch.max(a, b)`` are refused."""
    dim = args[0] if args else kw.get("dim")
    if isinstance(dim, fx.Node):
        raise unsupported(node, "the element-wise maximum of two tensors")
    if dim is None:
        raise unsupported(node, "max over every dim (give dim and keepdim=True)")
    keepdim = args[1] if len(args) > 1 else kw.get("keepdim", False)
    (d,) = _dims(node, a, dim, keepdim, "max")
    (x,) = _tensor_operands(c, node, a)
    return MaxWithIndices(c.graph.reduce_max(x, d), node)


def getitem(c: Converter, node: fx.Node, a: Any, index: Any) -> Value:
    """``torch.max(x, dim)[0]`` (``.values``); the indices are refused."""
    pair = c.env.get(a) if isinstance(a, fx.Node) else None
    if not isinstance(pair, MaxWithIndices):
        raise unsupported(node, "indexing a result (only max(x, dim).values)")
    if index == 0:
        return pair.values
    if not node.users:
        return pair  # torch.export unpacks the indices even when nothing reads them
    raise unsupported(pair.node, "the indices of max (argmax has no kernel-dialect op)")


def softmax(c: Converter, node: fx.Node, a: Any, dim: int, *rest: Any) -> Value:
    """``exp(x - max(x)) / sum(exp(x - max(x)))`` over ``dim``: the row maximum
    keeps ``exp`` finite at any input scale, and the verifier proves the form
    equal to ``exp(x) / sum(exp(x))`` (``docs/verifier.md``)."""
    if rest and rest[0] not in (None, False, node_meta(a).dtype):
        raise unsupported(node, "softmax with a dtype change")
    (x,) = _tensor_operands(c, node, a)
    d = dim % len(node_shape(a))
    e = c.graph.exp(c.graph.add(x, c.graph.neg(c.graph.reduce_max(x, d))))
    return c.graph.div(e, c.graph.reduction(e, d))


def rms_norm(
    c: Converter,
    node: fx.Node,
    a: Any,
    normalized_shape: Sequence[int],
    weight: Any = None,
    eps: Any = None,
) -> Value:
    """``F.rms_norm`` / ``nn.RMSNorm`` over the last dim, keeping ``eps``; when
    it is None torch takes the epsilon of the type it computes in (fp32 for
    f16, bf16 and f32). A weight other than all ones multiplies the result,
    broadcast over the rows."""
    if list(normalized_shape) != [node_shape(a)[-1]]:
        raise unsupported(node, "RMSNorm over more than the last dim")
    (x,) = _tensor_operands(c, node, a)
    if eps is None:
        eps = torch.finfo(torch.float32).eps
    normed = c.graph.rms_norm(x, float(eps))
    if weight is None:
        return normed
    w = _parameter(c, weight)
    if w is None:
        raise unsupported(node, "RMSNorm with a weight that is not a parameter")
    if bool(torch.all(w == 1)):
        return normed
    rank = len(node_shape(a))
    return c.graph.mul(normed, c.constant(w.reshape((1,) * (rank - 1) + (-1,))))


def identity(c: Converter, node: fx.Node, a: Any, *rest: Any, **kw: Any) -> Value:
    """Copies, aliases and casts to the same dtype compute nothing."""
    if node_meta(node).dtype != node_meta(a).dtype:
        raise unsupported(node, "a dtype conversion (mirage keeps one dtype)")
    if node_shape(node) != node_shape(a):
        raise unsupported(node, "a copy that changes the shape")
    return c.env[a]


TABLE_RULES = {Form.UNARY: unary, Form.BINARY: elementwise}
"""The rule of an element-wise op of the table's form that an ATen op is
exactly (:attr:`OpSpec.torch`); one with a constant needs its own rule."""

ATEN_RULES: dict[Any, Rule] = {
    **{
        getattr(aten, name): TABLE_RULES[spec.form](kind)
        for kind, spec in OPS.items()
        for name in spec.torch
    },
    aten.matmul: matmul,
    aten.mm: matmul,
    aten.bmm: matmul,
    aten.linear: linear,
    aten.t: shape_change,
    aten.numpy_T: shape_change,
    aten.transpose: shape_change,
    aten.permute: shape_change,
    aten.view: shape_change,
    aten.reshape: shape_change,
    aten.unsqueeze: shape_change,
    aten.flatten: shape_change,
    aten._unsafe_view: shape_change,
    aten.expand: shape_change,
    aten.scaled_dot_product_attention: sdpa,
    aten.add: add,
    aten.sub: sub,
    aten.rsub: rsub,
    aten.mul: mul,
    aten.div: div,
    aten.sigmoid: sigmoid,
    aten.gelu: gelu,
    aten.sqrt: sqrt,
    aten.rsqrt: rsqrt,
    aten.pow: pow_,
    aten.square: square,
    aten.mean: mean,
    aten.sum: reduce_sum,
    aten.amax: amax,
    aten.max: max_,
    operator.getitem: getitem,
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
"""ATen op (overload packet) -> conversion rule: the ATen names of the op
table's entries, then the rules written here (patterns such as SiLU, RMSNorm
and the GELUs, and ops that take constants), which win where both name one."""

MATERIALISED = frozenset({"square", "sigmoid"})
"""Partial kinds that are ops of their own when used outside their fused op:
``x^2`` becomes ``kernel.square``, a sigmoid outside SiLU ``kernel.sigmoid``."""

IGNORED = {aten._assert_tensor_metadata.default}
"""Checks torch.export inserts; they compute nothing."""
