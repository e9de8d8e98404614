"""Reductions: ``sum``, ``amax``, ``max`` (values), and softmax."""

from __future__ import annotations

from typing import Any

from torch import fx
from xdsl.ir import SSAValue

from mirage_xdsl.torch.nodes import (
    DTYPES,
    node_meta,
    node_shape,
    reduced_dims,
    unsupported,
)
from mirage_xdsl.torch.rules.attention import masked_softmax
from mirage_xdsl.torch.rules.operands import (
    Converter,
    MaskedScores,
    MaxWithIndices,
    Pieces,
    Value,
    tensor_operands,
)
from mirage_xdsl.torch.rules.slicing import piece


def summed(c: Converter, x: SSAValue, dims: list[int]) -> SSAValue:
    """``x`` summed over each of ``dims``, one reduction a dim (each kept
    with size 1, as the dialect keeps reduced dims)."""
    for d in dims:
        x = c.graph.reduction(x, d)
    return x


def maxed(c: Converter, x: SSAValue, dims: list[int]) -> SSAValue:
    """The maximum of ``x`` over each of ``dims`` (a maximum of maxima)."""
    for d in dims:
        x = c.graph.reduce_max(x, d)
    return x


def reduce_sum(
    c: Converter, node: fx.Node, a: Any, dims: Any = None, keepdim=False, **kw: Any
) -> Value:
    """``x.sum(dims, keepdim)``: one reduction per dim (the dialect keeps each
    reduced dim with size 1; without ``keepdim`` a reshape drops them). A
    float ``dtype`` is a cast, which the kernels' fp32 sums fold away as
    ``.to()`` does."""
    rank = len(node_shape(a))
    if not dims:
        raise unsupported(node, "a sum over every dim")
    if kw.get("dtype") is not None and node_meta(node).dtype not in DTYPES:
        raise unsupported(node, f"a sum into {kw['dtype']} (mirage computes in floats)")
    (x,) = tensor_operands(c, node, a)
    x = summed(c, x, reduced_dims(dims, rank))
    return x if keepdim else c.graph.reshape(x, node_shape(node))


def _dims(node: fx.Node, a: Any, dims: Any, keepdim: Any, what: str) -> list[int]:
    """The reduced dims of a max over ``a``: explicit, kept (the dialect keeps
    reduced dims with size 1), each once and counted from the front."""
    reduced = reduced_dims(dims, len(node_shape(a)))
    if not reduced or not keepdim:
        raise unsupported(
            node,
            f"{what} needs explicit dims and keepdim=True (the dialect keeps them)",
        )
    return reduced


def amax(c: Converter, node: fx.Node, a: Any, dims: Any = (), keepdim=False) -> Value:
    """``torch.amax(x, dims, keepdim=True)``: one ``reduce_max`` per dim (the
    maximum over several dims is the maximum of maxima)."""
    reduced = _dims(node, a, dims, keepdim, "amax")
    (x,) = tensor_operands(c, node, a)
    return maxed(c, x, reduced)


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
    (x,) = tensor_operands(c, node, a)
    return MaxWithIndices(c.graph.reduce_max(x, d), node)


def getitem(c: Converter, node: fx.Node, a: Any, index: Any) -> Value:
    """``torch.max(x, dim)[0]`` (``.values``), the indices refused; a piece
    of ``split`` / ``chunk``."""
    pair = c.env.get(a) if isinstance(a, fx.Node) else None
    if isinstance(pair, Pieces):
        return piece(c, node, pair, index)
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
    equal to ``exp(x) / sum(exp(x))`` (``docs/verifier.md``). Of scores filled
    with ``-inf`` where masked, the masked softmax of attention (a row with
    every entry masked is 0, as SDPA gives it, where torch's softmax is NaN)."""
    if rest and rest[0] not in (None, False, node_meta(a).dtype):
        raise unsupported(node, "softmax with a dtype change")
    d = dim % len(node_shape(a))
    scores = c.env.get(a)
    if isinstance(scores, MaskedScores) and d == len(node_shape(a)) - 1:
        return masked_softmax(c, node, scores.x, ("mul", scores.keep))
    (x,) = tensor_operands(c, node, a)
    e = c.graph.exp(c.graph.add(x, c.graph.neg(c.graph.reduce_max(x, d))))
    return c.graph.div(e, c.graph.reduction(e, d))


def log_softmax(c: Converter, node: fx.Node, a: Any, dim: int, *rest: Any) -> Value:
    """``(x - max(x)) - log(sum(exp(x - max(x))))`` over ``dim``."""
    if rest and rest[0] not in (None, False, node_meta(a).dtype):
        raise unsupported(node, "log_softmax with a dtype change")
    (x,) = tensor_operands(c, node, a)
    d = dim % len(node_shape(a))
    shifted = c.graph.add(x, c.graph.neg(c.graph.reduce_max(x, d)))
    total = c.graph.reduction(c.graph.exp(shifted), d)
    return c.graph.add(shifted, c.graph.neg(c.graph.log(total)))


def logsumexp(c: Converter, node: fx.Node, a: Any, dims: Any, keepdim=False) -> Value:
    """``log(sum(exp(x - m))) + m`` over ``dims``, ``m`` their maximum (the
    shift keeps ``exp`` finite); without ``keepdim`` a reshape drops them."""
    reduced = reduced_dims(dims, len(node_shape(a)))
    if not reduced:
        raise unsupported(node, "a logsumexp over every dim")
    (x,) = tensor_operands(c, node, a)
    m = maxed(c, x, reduced)
    total = summed(c, c.graph.exp(c.graph.add(x, c.graph.neg(m))), reduced)
    y = c.graph.add(c.graph.log(total), m)
    return y if keepdim else c.graph.reshape(y, node_shape(node))
