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

from mirage_xdsl.ir.builder import float16, new_kernel_graph, new_threadblock_graph
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


# --- the layer's pieces, as kernel programs and as fused µGraphs -------------


def _fragment_inputs(g, batch: int, scale: int, count: int):
    rows, d = 256 // scale, 64
    first = g.new_input((batch, 2, rows, d), float16)
    return [first] + [g.new_input((batch, 2, d, d), float16) for _ in range(count)]


def build_norm_projection(batch: int = 1, scale: int = 1) -> ModuleOp:
    """RMSNorm then a per-head projection: the layer's first piece."""
    g = new_kernel_graph("norm_projection")
    x, w = _fragment_inputs(g, batch, scale, 1)
    g.mark_output(g.matmul(g.rms_norm(x), w))
    return g.module()


def build_norm_projection_fused(batch: int = 1, scale: int = 1) -> ModuleOp:
    """One kernel: each block normalises 64 rows of one head and projects them."""
    g = new_kernel_graph("norm_projection")
    x, w = _fragment_inputs(g, batch, scale, 1)
    rows = (256 // scale) // 64 or 1
    bg = new_threadblock_graph((2, rows, batch), (128, 1, 1), 1)
    bx = bg.new_input(x, (1, 2, 0), -1)
    bw = bg.new_input(w, (1, -1, 0), -1)
    bg.new_output(bg.matmul(bg.rms_norm(bx), bw), (1, 2, 0))
    g.mark_output(g.customized([x, w], bg)[0])
    return g.module()


def build_head_mlp(batch: int = 1, scale: int = 1) -> ModuleOp:
    """The per-head gated MLP: silu(N·A) ∘ (N·B)."""
    g = new_kernel_graph("head_mlp")
    n, a, b = _fragment_inputs(g, batch, scale, 2)
    g.mark_output(g.mul(g.silu(g.matmul(n, a)), g.matmul(n, b)))
    return g.module()


def build_head_mlp_fused(batch: int = 1, scale: int = 1) -> ModuleOp:
    """One kernel: both matmuls and the gating per block of 64 rows."""
    g = new_kernel_graph("head_mlp")
    n, a, b = _fragment_inputs(g, batch, scale, 2)
    rows = (256 // scale) // 64 or 1
    bg = new_threadblock_graph((2, rows, batch), (128, 1, 1), 1)
    bn = bg.new_input(n, (1, 2, 0), -1)
    ba = bg.new_input(a, (1, -1, 0), -1)
    bb = bg.new_input(b, (1, -1, 0), -1)
    bg.new_output(bg.mul(bg.silu(bg.matmul(bn, ba)), bg.matmul(bn, bb)), (1, 2, 0))
    g.mark_output(g.customized([n, a, b], bg)[0])
    return g.module()


FRAGMENTS = {
    "norm_projection": (build_norm_projection, build_norm_projection_fused),
    "head_mlp": (build_head_mlp, build_head_mlp_fused),
}
"""Layer pieces the library carries beside the workloads: (plain, fused)."""
