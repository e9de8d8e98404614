"""RMSNorm: ``F.rms_norm`` and the pieces of its written-out form
(``x^2``, ``mean``, ``sqrt``, ``rsqrt``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import fx
from xdsl.ir import SSAValue

from mirage_xdsl.torch.nodes import (
    aten,
    last_dim_only,
    node_shape,
    reduced_dims,
    unsupported,
)
from mirage_xdsl.torch.rules.arith import broadcast_operands, reciprocal_of, unary
from mirage_xdsl.torch.rules.operands import (
    Converter,
    Partial,
    Value,
    parameter_of,
    partial_of,
    tensor_operands,
)
from mirage_xdsl.torch.rules.reductions import summed


def pow_(c: Converter, node: fx.Node, a: Any, exponent: Any) -> Value:
    """``x^2`` (a piece of an RMSNorm, or ``kernel.square``) and other whole
    powers up to 4 as products (``x^3``: GPT-2's tanh GELU)."""
    if exponent == 2:
        return Partial("square", c.value(a), node)
    if exponent not in (1, 3, 4):
        raise unsupported(node, f"exponent {exponent!r} (whole powers 1 to 4)")
    x = c.value(a)
    if exponent == 1:
        return x
    sq = c.graph.square(x)
    return c.graph.mul(sq, x) if exponent == 3 else c.graph.square(sq)


def square(c: Converter, node: fx.Node, a: Any) -> Value:
    return Partial("square", c.value(a), node)


def mean(c: Converter, node: fx.Node, a: Any, dims: Any = None, keepdim=False, **kw):
    """``mean(x^2)`` over the last dim is a piece of an RMSNorm; any other
    mean over given dims is a sum of each times ``1 / count`` (the reduced
    dims dropped by a reshape unless ``keepdim``)."""
    shape = node_shape(a)
    sq = partial_of(c, a, "square")
    if sq is not None and keepdim and last_dim_only(node, dims, len(shape)):
        return Partial("mean_square", sq.x, node)
    if not dims or kw.get("dtype") is not None:
        raise unsupported(node, "a mean over every dim, or with a dtype")
    reduced = reduced_dims(dims, len(shape))
    x = summed(c, c.value(a), reduced)
    x = c.graph.mul_scalar(x, 1.0 / math.prod(shape[d] for d in reduced))
    return x if keepdim else c.graph.reshape(x, node_shape(node))


def adaptive_avg_pool(c: Converter, node: fx.Node, a: Any, size: Any) -> Value:
    """``F.adaptive_avg_pool1d`` / ``2d`` where each pooled dim divides into
    its output size (a pooler's size 1: Swin's, ConvNeXt's): each window a
    dim of its own (a reshape), summed, times ``1 / window``."""
    sizes = [size] if isinstance(size, int) else list(size)
    shape = list(node_shape(a))
    pooled = shape[len(shape) - len(sizes) :]
    if any(o <= 0 or n % o for n, o in zip(pooled, sizes, strict=True)):
        raise unsupported(
            node, f"adaptive pooling of {pooled} to {sizes} (windows of one size only)"
        )
    lead = shape[: len(shape) - len(sizes)]
    windows = [n // o for n, o in zip(pooled, sizes, strict=True)]
    split = [*lead, *(d for o, w in zip(sizes, windows, strict=True) for d in (o, w))]
    x = c.graph.reshape(c.value(a), tuple(split))
    for i in range(len(sizes)):
        x = c.graph.reduction(x, len(lead) + 2 * i + 1)
    x = c.graph.mul_scalar(x, 1.0 / math.prod(windows))
    return c.graph.reshape(x, node_shape(node))


def layer_norm(
    c: Converter,
    node: fx.Node,
    a: Any,
    normalized_shape: Sequence[int],
    weight: Any = None,
    bias: Any = None,
    eps: float = 1e-5,
    *rest: Any,
) -> Value:
    """``F.layer_norm`` / ``nn.LayerNorm`` over the last dim: the RMSNorm of
    ``x - mean(x)`` (exactly ``(x - mean) / sqrt(var + eps)``), times the
    weight, plus the bias."""
    shape = node_shape(a)
    if list(normalized_shape) != [shape[-1]]:
        raise unsupported(node, "LayerNorm over more than the last dim")
    y = _centred_norm(c, c.value(a), eps)
    if weight is not None:
        y = c.graph.mul(y, c.value(weight))
    if bias is not None:
        y = c.graph.add(y, c.value(bias))
    return y


def _centred_norm(c: Converter, x: SSAValue, eps: float) -> SSAValue:
    """``(x - mean) / sqrt(var + eps)`` over the last dim: the RMSNorm of
    ``x - mean(x)``, exactly."""
    shape = x.type.get_shape()  # type: ignore[attr-defined]
    mu = c.graph.mul_scalar(c.graph.reduction(x, len(shape) - 1), 1.0 / shape[-1])
    return c.graph.rms_norm(c.graph.add(x, c.graph.neg(mu)), float(eps))


def group_norm(
    c: Converter,
    node: fx.Node,
    a: Any,
    groups: int,
    weight: Any = None,
    bias: Any = None,
    eps: float = 1e-5,
    *rest: Any,
) -> Value:
    """``F.group_norm`` / ``nn.GroupNorm`` over ``[N, C, *]``: each group's
    channels (and positions) a row (a reshape), the LayerNorm of the row,
    reshaped back, times the weight and plus the bias per channel."""
    shape = node_shape(a)
    if len(shape) < 2 or shape[1] % groups:
        raise unsupported(node, f"a group norm of {groups} groups over {shape}")
    rows = (shape[0], groups, math.prod(shape[1:]) // groups)
    y = _centred_norm(c, c.graph.reshape(c.value(a), rows), eps)
    y = c.graph.reshape(y, tuple(shape))
    per_channel = (shape[1], *(1,) * (len(shape) - 2))
    if weight is not None:
        y = c.graph.mul(y, c.graph.reshape(c.value(weight), per_channel))
    if bias is not None:
        y = c.graph.add(y, c.graph.reshape(c.value(bias), per_channel))
    return y


def cosine_similarity(
    c: Converter, node: fx.Node, a: Any, b: Any, dim: int = 1, eps: float = 1e-8
) -> Value:
    """``F.cosine_similarity``: ``sum(a b) / sqrt(max(sum(a^2) sum(b^2),
    eps^2))`` over ``dim``, as torch computes it."""
    shape = node_shape(node)
    x, y = broadcast_operands(c, node, a, b)
    d = dim % max(len(node_shape(a)), len(node_shape(b)))
    dot = c.graph.reduction(c.graph.mul(x, y), d)
    norms = c.graph.mul(
        c.graph.reduction(c.graph.square(x), d), c.graph.reduction(c.graph.square(y), d)
    )
    denom = c.graph.sqrt(c.graph.clamp_min(norms, float(eps) * float(eps)))
    return c.graph.reshape(c.graph.div(dot, denom), tuple(shape))


def sqrt(c: Converter, node: fx.Node, a: Any) -> Value:
    ms = partial_of(c, a, "mean_square")
    return Partial("rms", ms.x, node, ms.eps) if ms else unary("sqrt")(c, node, a)


def rsqrt(c: Converter, node: fx.Node, a: Any) -> Value:
    """Inside an RMSNorm, a piece of it; elsewhere ``1 / sqrt(x)``."""
    ms = partial_of(c, a, "mean_square")
    if ms is None:
        (x,) = tensor_operands(c, node, a)
        return reciprocal_of(c, c.graph.sqrt(x))
    return Partial("inv_rms", ms.x, node, ms.eps)


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
    f16, bf16 and f32). A weight multiplies the result, broadcast over the
    rows: a parameter of all ones is left out, and a weight that is an input
    (a parameter ``torch.compile`` lifts into the graph) is read as one."""
    if list(normalized_shape) != [node_shape(a)[-1]]:
        raise unsupported(node, "RMSNorm over more than the last dim")
    (x,) = tensor_operands(c, node, a)
    if eps is None:
        eps = torch.finfo(torch.float32).eps
    normed = c.graph.rms_norm(x, float(eps))
    if weight is None:
        return normed
    w = parameter_of(c, weight)
    if w is None:
        return c.graph.mul(normed, c.value(weight))
    if bool(torch.all(w == 1)):
        return normed
    rank = len(node_shape(a))
    return c.graph.mul(normed, c.constant(w.reshape((1,) * (rank - 1) + (-1,))))


def vector_norm(
    c: Converter,
    node: fx.Node,
    a: Any,
    ord: Any = 2,
    dims: Any = None,
    keepdim: bool = False,
    **kw: Any,
) -> Value:
    """``torch.linalg.vector_norm(x, 2, dims)`` (``x.norm(dim=...)``, and
    ``F.normalize``'s norm): ``sqrt(sum(x^2))`` over the dims."""
    reduced = reduced_dims(kw.get("dim", dims), len(node_shape(a)))
    keepdim = kw.get("keepdim", keepdim)
    if ord not in (2, 2.0) or not reduced or kw.get("dtype") is not None:
        raise unsupported(node, "a vector norm other than the 2-norm over given dims")
    x = c.graph.sqrt(summed(c, c.graph.square(c.value(a)), reduced))
    return x if keepdim else c.graph.reshape(x, node_shape(node))


def variance(
    c: Converter,
    node: fx.Node,
    a: Any,
    dims: Any = None,
    correction: Any = None,
    keepdim: bool = False,
    **kw: Any,
) -> Value:
    """``x.var(dims, correction=k)`` (``unbiased=False`` is ``k = 0``; torch's
    default 1): ``sum((x - mean)^2) / (n - k)`` over the dims; ``x.std``, its
    square root."""
    shape = node_shape(a)
    reduced = reduced_dims(kw.get("dim", dims), len(shape))
    if not reduced:
        raise unsupported(node, "a variance over every dim")
    n = math.prod(shape[d] for d in reduced)
    correction = kw.get("correction", correction)
    keepdim = kw.get("keepdim", keepdim)
    if getattr(node.target, "_overloadname", "") == "dim":  # (x, dims, unbiased)
        correction = 1 if correction is None or correction else 0
    k = 1 if correction is None else float(correction)
    if n - k <= 0:
        raise unsupported(node, f"a variance of {n} elements with correction {k}")
    x = c.value(a)
    total = summed(c, x, reduced)
    d = c.graph.add(x, c.graph.neg(c.graph.mul_scalar(total, 1.0 / n)))
    out = summed(c, c.graph.square(d), reduced)
    out = c.graph.mul_scalar(out, 1.0 / (n - k))
    if node.target.overloadpacket is aten.std:
        out = c.graph.sqrt(out)
    return out if keepdim else c.graph.reshape(out, node_shape(node))
