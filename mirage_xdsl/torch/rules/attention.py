"""``F.scaled_dot_product_attention``."""

from __future__ import annotations

import math
from typing import Any

from torch import fx

from mirage_xdsl.torch.nodes import (
    node_shape,
    unsupported,
)
from mirage_xdsl.torch.rules.operands import (
    Converter,
    Value,
)


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
