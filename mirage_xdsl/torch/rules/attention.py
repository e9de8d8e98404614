"""``F.scaled_dot_product_attention``: ``softmax(q k^T * scale + mask) v``.

- The softmax is the safe one (the row maximum subtracted).
- Grouped heads (``enable_gqa``, keys and values widened by ``repeat_kv``:
  ``unsqueeze``, ``expand``, ``reshape``, or one key head that broadcasts
  over all the query heads, as multi-query attention passes it) stack each
  group's queries as rows, ``[.., h, l, d] -> [.., g, (h/g) l, d]``, so one
  batched matmul per key head serves its group and the widened keys are
  never built.
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
    shared = kv_heads == 1  # one key head broadcasts over all (multi-query)
    may_group = enable_gqa or widened or shared
    if heads != kv_heads and not (may_group and heads % kv_heads == 0):
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
    mask = mask_of(c, node, attn_mask, is_causal, (sq, sk, kv_heads, group))
    # the grouped view [.., kv heads, group, l, s] is needed only for a mask
    # that differs between the stacked rows; otherwise the attention stays one
    # run of arithmetic ops for the search (a layout op would cut it)
    grouped = mask is not None and mask[2]
    if grouped:
        scores = c.graph.reshape(scores, (*sq[:-3], kv_heads, group, sq[-2], sk[-2]))
    p = masked_softmax(c, node, scores, mask[:2] if mask else None)
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
    c: Converter,
    node: fx.Node,
    mask: Any,
    is_causal: bool,
    shapes: tuple[tuple[int, ...], tuple[int, ...], int, int],
) -> tuple[str, SSAValue, bool] | None:
    """The mask as ``("mul", 0/1)`` or ``("add", bias)``, shaped to broadcast
    over the scores, and whether the scores need the grouped view ``[..,
    kv heads, group, l, s]`` for it. Scores of grouped heads stack each
    group's ``l`` query rows (``[.., kv heads, group l, s]``): a mask the same
    for every head and row broadcasts over them as it is, and the causal mask
    is built stacked."""
    sq, sk, kv_heads, group = shapes
    rows, cols = sq[-2], sk[-2]
    lead = (1,) * (len(sq) - 2)
    if is_causal and mask is not None:
        raise unsupported(node, "both a mask and is_causal")
    if is_causal:
        causal = torch.ones(rows, cols).tril().repeat(group, 1)
        return "mul", c.constant(causal.reshape((*lead, group * rows, cols))), False
    if mask is None:
        return None
    kind = "mul" if node_meta(mask).dtype == torch.bool else "add"
    shape = node_shape(mask)
    *mbatch, mh, ml, ms = (1,) * (len(sq) - len(shape)) + tuple(shape)
    if mh not in (1, kv_heads * group):
        raise unsupported(node, f"a mask over {mh} heads for {kv_heads * group}")
    grouped = group > 1 and (mh > 1 or ml > 1)
    heads = ((kv_heads, group) if mh > 1 else (1, 1)) if grouped else (mh,)
    m = c.value(mask)
    if (*mbatch, *heads, ml, ms) != node_shape(mask):
        m = c.graph.reshape(m, (*mbatch, *heads, ml, ms))
    return kind, m, grouped


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
