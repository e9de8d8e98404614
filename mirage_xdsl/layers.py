"""Larger programs made of the workloads: what the rewrite library is for.

``build_transformer_layer`` is one decoder layer in the GQA layout
``[batch, kv_heads, rows, head_dim]``: RMSNorm, a per-head projection,
attention over a key/value cache, a residual, RMSNorm again and a gated MLP
with its residual. Each piece is a kernel-level subgraph the rewrite library
knows, so ``apply-mirage-rewrites`` optimises the layer without a search.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.graph import float16, new_kernel_graph
from mirage_xdsl.workloads import np_attention, np_rms_norm


def build_transformer_layer(batch: int = 1, scale: int = 1) -> ModuleOp:
    g = new_kernel_graph("transformer_layer")
    rows, keys, d = 256 // scale, 4096 // scale, 64
    x = g.new_input((batch, 2, rows, d), float16)
    wq = g.new_input((batch, 2, d, d), float16)
    k = g.new_input((batch, 2, d, keys), float16)
    v = g.new_input((batch, 2, keys, d), float16)
    a = g.new_input((batch, 2, d, d), float16)
    b = g.new_input((batch, 2, d, d), float16)
    q = g.matmul(g.rms_norm(x), wq)
    e = g.exp(g.matmul(q, k))
    attn = g.matmul(g.div(e, g.reduction(e, 3)), v)
    h = g.add(attn, x)
    n = g.rms_norm(h)
    mlp = g.mul(g.silu(g.matmul(n, a)), g.matmul(n, b))
    g.mark_output(g.add(mlp, h))
    return g.module()


def ref_transformer_layer(x, wq, k, v, a, b) -> list[np.ndarray]:
    x, wq, k, v, a, b = (np.asarray(t, np.float32) for t in (x, wq, k, v, a, b))
    h = np_attention(np_rms_norm(x) @ wq, k, v) + x
    n = np_rms_norm(h)
    g = n @ a
    return [g / (1 + np.exp(-g)) * (n @ b) + h]
