"""Element-wise arithmetic: the op table's unary and binary ops, the rules
for ``add``, ``sub``, ``mul``, ``div`` with constants and the fused patterns
they close (SiLU, RMSNorm), and ``clamp`` by constant bounds."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import fx
from xdsl.ir import SSAValue

from mirage_xdsl.dialects import shapes
from mirage_xdsl.torch.nodes import (
    node_shape,
    unsupported,
)
from mirage_xdsl.torch.rules.operands import (
    Converter,
    Partial,
    Rule,
    Value,
    as_number,
    check_shape,
    is_x_of,
    partial_of,
    refuse_scalars,
    tensor_and_scalar,
    tensor_operands,
)


def elementwise(kind: str) -> Rule:
    def rule(c: Converter, node: fx.Node, a: Any, b: Any, **kw: Any) -> Value:
        if kw.get("alpha", 1) != 1 or kw.get("rounding_mode") is not None:
            raise unsupported(node, f"options {kw}")
        x, y = broadcast_operands(c, node, a, b)
        return getattr(c.graph, kind)(x, y)

    return rule


def broadcast_operands(
    c: Converter, node: fx.Node, a: Any, b: Any
) -> tuple[SSAValue, SSAValue]:
    """Both tensor operands, checked to broadcast (a lower-rank one, a 1-d norm
    weight or a bias, lines up with the trailing dims, as in torch)."""
    refuse_scalars(node, a, b)
    check_shape(node, shapes.broadcast, node_shape(a), node_shape(b))
    return c.value(a), c.value(b)


def unary(kind: str) -> Rule:
    def rule(c: Converter, node: fx.Node, a: Any) -> Value:
        (x,) = tensor_operands(c, node, a)
        return getattr(c.graph, kind)(x)

    return rule


def _plus_constant(c: Converter, node: fx.Node, x: fx.Node, k: float) -> Value:
    """``x + k``: inside an RMSNorm (``mean(x^2) + k``) it is the epsilon,
    elsewhere ``add_scalar``."""
    ms = partial_of(c, x, "mean_square")
    if ms is not None:
        return Partial("mean_square", ms.x, node, ms.eps + k)
    return c.graph.add_scalar(c.value(x), k)


def add(c: Converter, node: fx.Node, a: Any, b: Any, **kw: Any) -> Value:
    """``mean(x^2) + eps`` is the inside of an RMSNorm, which keeps ``eps``;
    ``x + c`` and ``c + x`` with a Python number are ``add_scalar``."""
    if kw.get("alpha", 1) != 1:
        raise unsupported(node, f"options {kw}")
    scalar = tensor_and_scalar(a, b, commutes=True)
    if scalar is not None:
        return _plus_constant(c, node, *scalar)
    return elementwise("add")(c, node, a, b, **kw)


def sub(c: Converter, node: fx.Node, a: Any, b: Any, **kw: Any) -> Value:
    """``x - c`` with a Python number is ``add_scalar(x, -c)`` (inside an
    RMSNorm, ``eps - c``), ``c - x`` is ``add_scalar(neg(x), c)``, and ``a - b``
    of two tensors ``a + (-b)``: the dialect has negation, not subtraction."""
    if kw.get("alpha", 1) != 1:
        raise unsupported(node, f"options {kw}")
    scalar = tensor_and_scalar(a, b, commutes=False)
    if scalar is not None:
        x, k = scalar
        return _plus_constant(c, node, x, -k)
    k = as_number(a)
    if k is not None and isinstance(b, fx.Node):
        return c.graph.add_scalar(c.graph.neg(c.value(b)), k)
    x, y = broadcast_operands(c, node, a, b)
    return c.graph.add(x, c.graph.neg(y))


def rsub(c: Converter, node: fx.Node, a: Any, b: Any, alpha: Any = 1) -> Value:
    """``torch.rsub(x, c)`` is ``c - x``: :func:`sub` with the operands swapped
    (``aten.rsub`` takes its ``alpha`` by position)."""
    return sub(c, node, b, a, alpha=alpha)


def mul(c: Converter, node: fx.Node, a: Any, b: Any) -> Value:
    """``x * rsqrt(mean(x^2))`` is RMSNorm, ``x * sigmoid(x)`` SiLU, ``x * x``
    x^2, ``x * c`` and ``c * x`` with a Python number ``mul_scalar``."""
    for p, q in ((a, b), (b, a)):
        part = partial_of(c, q, "inv_rms", "sigmoid")
        if part is not None and is_x_of(c, p, part):
            if part.kind == "inv_rms":
                return c.graph.rms_norm(part.x, part.eps)
            return c.graph.silu(part.x)
    if isinstance(a, fx.Node) and isinstance(b, fx.Node) and c.env[a] is c.env[b]:
        return Partial("square", c.value(a), node)  # one value, maybe two nodes
    scalar = tensor_and_scalar(a, b, commutes=True)
    if scalar is not None:
        return c.graph.mul_scalar(c.value(scalar[0]), scalar[1])
    return elementwise("mul")(c, node, a, b)


def div(c: Converter, node: fx.Node, a: Any, b: Any, **kw: Any) -> Value:
    """``x / sqrt(mean(x^2))`` is RMSNorm; ``x / c`` with a nonzero Python
    number is ``mul_scalar(x, 1 / c)``; ``c / x`` is refused."""
    part = partial_of(c, b, "rms")
    if part is not None and is_x_of(c, a, part) and not kw:
        return c.graph.rms_norm(part.x, part.eps)
    scalar = tensor_and_scalar(a, b, commutes=False)
    if scalar is not None and not kw:
        if scalar[1] == 0:
            raise unsupported(node, "division by the constant 0")
        return c.graph.mul_scalar(c.value(scalar[0]), 1.0 / scalar[1])
    if as_number(a) is not None:
        raise unsupported(node, "c / x (the kernel dialect has x / c only)")
    return elementwise("div")(c, node, a, b, **kw)


def reciprocal_of(c: Converter, x: SSAValue) -> SSAValue:
    """``1 / x``: a constant 1 (made at capture) divided by ``x``; ``1 / 0``
    is inf, as in torch."""
    return c.graph.div(c.constant(torch.ones(1)), x)


def reciprocal(c: Converter, node: fx.Node, a: Any) -> Value:
    """``torch.reciprocal(x)``, and so ``c / x`` (torch writes it as
    ``reciprocal(x) * c``)."""
    (x,) = tensor_operands(c, node, a)
    return reciprocal_of(c, x)


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


def clamp(c: Converter, node: fx.Node, a: Any, lo: Any = None, hi: Any = None) -> Value:
    """``x.clamp(min, max)`` (and ``clip``) by numbers: ``clamp_min`` then
    ``clamp_max``, as torch applies them (a lower bound above the upper one
    gives the upper). A bound that bounds nothing (a lower one of -inf, an
    upper one of inf: Bamba's ``dt_limit`` by default) is no op. Bounds
    that are tensors are refused."""
    (x,) = tensor_operands(c, node, a)
    for kind, bound, none in (
        ("clamp_min", lo, -math.inf),
        ("clamp_max", hi, math.inf),
    ):
        if bound is None:
            continue
        k = as_number(bound)
        if k is None:
            raise unsupported(node, "a clamp by a tensor bound (numbers only)")
        if k == none:
            continue
        if not math.isfinite(k):
            raise unsupported(node, f"a clamp at {k}")
        x = getattr(c.graph, kind)(x, k)
    return x


def clamp_min(c: Converter, node: fx.Node, a: Any, lo: Any) -> Value:
    return clamp(c, node, a, lo=lo)


def clamp_max(c: Converter, node: fx.Node, a: Any, hi: Any) -> Value:
    return clamp(c, node, a, hi=hi)


def hardtanh(
    c: Converter, node: fx.Node, a: Any, lo: Any = -1.0, hi: Any = 1.0
) -> Value:
    """``F.hardtanh(x, lo, hi)`` (``relu6`` is ``hardtanh(x, 0, 6)``): a clamp."""
    return clamp(c, node, a, lo=lo, hi=hi)


def relu6(c: Converter, node: fx.Node, a: Any) -> Value:
    return clamp(c, node, a, lo=0.0, hi=6.0)


SOFTPLUS_MIN_THRESHOLD = 12.0
"""torch's softplus returns ``x`` where ``x > threshold``; ``kernel.softplus``
is ``log(1 + e^x)`` everywhere, which differs there by ``log(1 +
e^-threshold)``: under half an fp32 ulp of ``x`` from this threshold on."""


def softplus(
    c: Converter, node: fx.Node, a: Any, beta: Any = 1, threshold: Any = 20
) -> Value:
    """``F.softplus(x)`` (Mamba's step size): ``kernel.softplus``, for beta 1
    and a threshold of at least :data:`SOFTPLUS_MIN_THRESHOLD`."""
    if beta != 1:
        raise unsupported(node, f"softplus with beta={beta} (only beta=1)")
    if threshold < SOFTPLUS_MIN_THRESHOLD:
        raise unsupported(
            node,
            f"softplus with threshold={threshold} (from "
            f"{SOFTPLUS_MIN_THRESHOLD:g} on it is log(1 + e^x) within fp32)",
        )
    return unary("softplus")(c, node, a)


def lerp(c: Converter, node: fx.Node, a: Any, b: Any, weight: Any) -> Value:
    """``torch.lerp(x, y, w)``: ``x + w (y - x)``, ``w`` a number or a tensor."""
    x, y = broadcast_operands(c, node, a, b)
    step = c.graph.add(y, c.graph.neg(x))
    w = as_number(weight)
    if w is None:
        check_shape(node, shapes.broadcast, node_shape(a), node_shape(weight))
        step = c.graph.mul(step, c.value(weight))
    else:
        step = c.graph.mul_scalar(step, w)
    return c.graph.add(x, step)


def addcmul(
    c: Converter, node: fx.Node, a: Any, b: Any, d: Any, value: Any = 1
) -> Value:
    """``torch.addcmul(x, a, b, value=v)``: ``x + v a b``."""
    product = c.graph.mul(*broadcast_operands(c, node, b, d))
    if value != 1:
        product = c.graph.mul_scalar(product, float(value))
    check_shape(node, shapes.broadcast, node_shape(a), node_shape(node))
    return c.graph.add(c.value(a), product)
