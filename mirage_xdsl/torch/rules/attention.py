"""``F.scaled_dot_product_attention``: ``softmax(q k^T * scale + mask) v``.

- The softmax is the safe one (the row maximum subtracted).
- Grouped heads (``enable_gqa``, or keys and values widened by ``repeat_kv``:
  ``unsqueeze``, ``expand``, ``reshape``) stack each group's queries as rows,
  ``[.., h, l, d] -> [.., g, (h/g) l, d]``, so one batched matmul per key head
  serves its group and the widened keys are never built.
- A boolean mask (``True`` attends) and ``is_causal`` are 0/1 multipliers of
  the exponentials (:func:`masked_softmax`), exact in the verifier's field. A
  float mask is added to the scores, as torch does.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import fx
from xdsl.ir import SSAValue

from mirage_xdsl.torch.nodes import node_meta, node_shape, unsupported
from mirage_xdsl.torch.rules.operands import Converter, Expanded, Value


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
    """The attention of ``q`` over ``k``/``v`` (see the module docstring)."""
    if dropout_p:
        raise unsupported(node, f"dropout_p={dropout_p} (no random op)")
    sq = node_shape(q)
    key, sk = grouped_heads(c, k)
    value, sv = grouped_heads(c, v)
    if len(sq) < 3 or not len(sq) == len(sk) == len(sv):
        raise unsupported(node, "query, key and value of different ranks, or < 3")
    heads, kv_heads = sq[-3], sk[-3]
    widened = node_shape(k)[-3] != kv_heads
    if heads != kv_heads and not ((enable_gqa or widened) and heads % kv_heads == 0):
        raise unsupported(
            node,
            f"{heads} query heads over {kv_heads} key heads "
            "(grouped heads need enable_gqa=True and a whole number of groups)",
        )
    group, rank = heads // kv_heads, len(sq)
    query = c.value(q)
    if group > 1:
        query = c.graph.reshape(query, (*sq[:-3], kv_heads, group * sq[-2], sq[-1]))
    scores = c.graph.matmul(query, c.graph.transpose(key, rank - 2, rank - 1))
    scores = c.graph.mul_scalar(scores, scale if scale else 1.0 / math.sqrt(sq[-1]))
    heads_view = (kv_heads, group) if group > 1 else (heads,)
    view = (*sq[:-3], *heads_view, sq[-2], sk[-2])
    mask = mask_of(c, node, attn_mask, is_causal, view)
    # only a mask needs the grouped view: without one, the softmax of the
    # stacked rows is the same, and the attention stays one run of
    # arithmetic ops for the search (a layout op would cut it)
    grouped = group > 1 and mask is not None
    if grouped:
        scores = c.graph.reshape(scores, view)
    p = masked_softmax(c, node, scores, mask)
    if grouped:
        p = c.graph.reshape(p, (*sq[:-3], kv_heads, group * sq[-2], sk[-2]))
    out = c.graph.matmul(p, value)
    if group > 1:
        out = c.graph.reshape(out, (*sq[:-1], sv[-1]))
    return out


def grouped_heads(c: Converter, a: Any) -> tuple[SSAValue, tuple[int, ...]]:
    """Keys or values, with heads widened by ``repeat_kv`` (``[.., g, 1, s, d]``
    expanded to ``[.., g, r, s, d]`` and reshaped to ``[.., g r, s, d]``) read
    as their ``g`` heads."""
    e = c.env.get(a)
    if isinstance(e, Expanded) and e.reshape is not None and len(e.shape) >= 5:
        src = tuple(e.x.type.get_shape())  # type: ignore[attr-defined]
        *batch, g, one, s, d = src
        widened = (*batch, g * e.shape[-3], s, d)
        if one == 1 and tuple(e.shape[:-3]) == (*batch, g) and e.reshape == widened:
            shape = (*batch, g, s, d)
            return c.graph.reshape(e.x, shape), shape
    return c.value(a), node_shape(a)


def mask_of(
    c: Converter, node: fx.Node, mask: Any, is_causal: bool, view: tuple[int, ...]
) -> tuple[str, SSAValue] | None:
    """The mask as ``("mul", 0/1)`` or ``("add", bias)``, shaped to broadcast
    over the scores ``view``: ``[.., heads, l, s]``, or ``[.., kv heads,
    group, l, s]`` for grouped heads."""
    if is_causal and mask is not None:
        raise unsupported(node, "both a mask and is_causal")
    rows, cols = view[-2:]
    if is_causal:
        causal = torch.ones(rows, cols).tril()
        return "mul", c.constant(causal.reshape((1,) * (len(view) - 2) + (rows, cols)))
    if mask is None:
        return None
    grouped = len(view) - len(node_shape(node))  # 1 when heads are grouped
    shape = node_shape(mask)
    shape = (1,) * (len(view) - grouped - len(shape)) + tuple(shape)
    *mbatch, mh, ml, ms = shape
    heads = math.prod(view[-4:-2]) if grouped else view[-3]
    if mh not in (1, heads):
        raise unsupported(node, f"a mask over {mh} heads for {heads}")
    head_view = view[-4:-2] if grouped else (mh,)
    if mh == 1:
        head_view = (1,) * len(head_view)
    m = c.value(mask)
    if (*mbatch, *head_view, ml, ms) != node_shape(mask):
        m = c.graph.reshape(m, (*mbatch, *head_view, ml, ms))
    return ("mul" if node_meta(mask).dtype == torch.bool else "add"), m


def masked_softmax(
    c: Converter, node: fx.Node, s: SSAValue, mask: tuple[str, SSAValue] | None
) -> SSAValue:
    """The safe softmax over the last dim, with the mask applied.

    A 0/1 mask ``M`` multiplies the exponentials: ``exp(s - max) M /
    sum(exp(s - max) M)``, plain ring arithmetic the verifier proves for every
    mask, and the form the search fuses into one kernel reading the mask along
    its key loop. The row maximum is over all scores, masked ones too: the
    shift cancels, and no exponential exceeds 1; an attended one underflows
    only if every attended score is below a masked one by more than fp32's
    range (about 87) inside a kernel, or f16's (about 17) where an
    unsearched program stores the exponentials in f16."""
    last = len(s.type.get_shape()) - 1  # type: ignore[attr-defined]
    if mask is not None and mask[0] == "add":
        s = c.graph.add(s, mask[1])
    e = c.graph.exp(c.graph.add(s, c.graph.neg(c.graph.reduce_max(s, last))))
    if mask is not None and mask[0] == "mul":
        e = c.graph.mul(e, mask[1])
    return c.graph.div(e, c.graph.reduction(e, last))
