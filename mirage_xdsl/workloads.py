"""The workload registry: the benchmark programs, shared by tests, search and tools.

Each workload is a builder taking the batch size and a ``scale`` that divides
the large dims (``scale=1`` gives the full benchmark shapes; tests use larger
scales to stay fast). ``reference`` computes the same function in plain numpy,
independently of the dialects, so the interpreter can be checked against it.
Hand-written ``kernel.customized`` versions of GQA (FlashDecoding-style, with a
combine kernel) and of RMSNorm+linear (norm fused into the matmul) live here
too, as known-good µGraphs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.ir.builder import (
    KernelGraph,
    float16,
    new_kernel_graph,
    new_threadblock_graph,
)
from mirage_xdsl.semantics.inputs import input_shapes, random_inputs  # noqa: F401 (re-exported)

BATCHES = (1, 8)


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    build: Callable[[int, int], ModuleOp]
    reference: Callable[..., list[np.ndarray]]

    def module(self, batch: int = 1, scale: int = 1) -> ModuleOp:
        return self.build(batch, scale)


# --- plain numpy references --------------------------------------------------


def _f32(*xs: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(x, np.float32) for x in xs]


def np_rms_norm(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True))


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    e = np.exp(q @ k)
    return (e / e.sum(-1, keepdims=True)) @ v


def ref_gqa(q, k, v):
    return [np_attention(*_f32(q, k, v))]


def ref_qknorm_gqa(q, k, v):
    q, k, v = _f32(q, k, v)
    return [np_attention(np_rms_norm(q), k, np_rms_norm(v))]


def ref_rmsnorm_linear(x, w):
    x, w = _f32(x, w)
    return [np_rms_norm(x) @ w]


def ref_lora(x, w, a, b):
    x, w, a, b = _f32(x, w, a, b)
    return [x @ w + (x @ a) @ b]


def ref_gated_mlp(x, a, b):
    x, a, b = _f32(x, a, b)
    g = x @ a
    return [g / (1 + np.exp(-g)) * (x @ b)]


def ref_norm_transformer(x, h, alpha):
    x, h, alpha = _f32(x, h, alpha)
    return [np_rms_norm(h) + x, np_rms_norm(x + alpha * x)]


# --- kernel-level programs ---------------------------------------------------


def _attention(g: KernelGraph, q, k, v):
    e = g.exp(g.matmul(q, k))
    return g.matmul(g.div(e, g.reduction(e, 3)), v)


def _gqa_inputs(g: KernelGraph, batch: int, scale: int):
    queries, keys = 256 // scale, 4096 // scale
    q = g.new_input((batch, 2, queries, 64), float16)
    k = g.new_input((batch, 2, 64, keys), float16)
    v = g.new_input((batch, 2, keys, 64), float16)
    return q, k, v


def build_gqa(batch: int, scale: int = 1) -> ModuleOp:
    g = new_kernel_graph("gqa")
    q, k, v = _gqa_inputs(g, batch, scale)
    g.mark_output(_attention(g, q, k, v))
    return g.module()


def build_qknorm_gqa(batch: int, scale: int = 1) -> ModuleOp:
    g = new_kernel_graph("qknorm_gqa")
    q, k, v = _gqa_inputs(g, batch, scale)
    g.mark_output(_attention(g, g.rms_norm(q), k, g.rms_norm(v)))
    return g.module()


def build_rmsnorm_linear(batch: int, scale: int = 1) -> ModuleOp:
    g = new_kernel_graph("rmsnorm_linear")
    d = 4096 // scale
    x = g.new_input((2 * batch, d), float16)
    w = g.new_input((d, d), float16)
    g.mark_output(g.matmul(g.rms_norm(x), w))
    return g.module()


def build_lora(batch: int, scale: int = 1) -> ModuleOp:
    g = new_kernel_graph("lora")
    d_in, d_out, rank = 256 // scale, 4096 // scale, 16
    x = g.new_input((batch, d_in), float16)
    w = g.new_input((d_in, d_out), float16)
    a = g.new_input((d_in, rank), float16)
    b = g.new_input((rank, d_out), float16)
    g.mark_output(g.add(g.matmul(x, w), g.matmul(g.matmul(x, a), b)))
    return g.module()


def build_gated_mlp(batch: int, scale: int = 1) -> ModuleOp:
    g = new_kernel_graph("gated_mlp")
    d = 4096 // scale
    x = g.new_input((batch, d), float16)
    a = g.new_input((d, d), float16)
    b = g.new_input((d, d), float16)
    g.mark_output(g.mul(g.silu(g.matmul(x, a)), g.matmul(x, b)))
    return g.module()


def build_norm_transformer(batch: int, scale: int = 1) -> ModuleOp:
    g = new_kernel_graph("norm_transformer")
    d = 4096 // scale
    x = g.new_input((batch, d), float16)
    h = g.new_input((batch, d), float16)
    alpha = g.new_input((batch, d), float16)
    g.mark_output(g.add(g.rms_norm(h), x))
    g.mark_output(g.rms_norm(g.add(x, g.mul(alpha, x))))
    return g.module()


# --- hand-written µGraphs ----------------------------------------------------


def build_gqa_flashdecoding(
    batch: int, scale: int = 1, splits: int = 16, forloop: int = 4
) -> ModuleOp:
    """GQA as a FlashDecoding-style µGraph: two customized kernels.

    Kernel 1: block (head, key split, batch) loops over its share of the keys,
    accumulating exp(QK)V and the row sums of exp(QK); each block writes its
    partial results side by side along the last dim. Kernel 2 loops over the
    splits, sums the partials and divides.
    """
    g = new_kernel_graph("gqa")
    q, k, v = _gqa_inputs(g, batch, scale)
    grid = (2, splits, batch)
    bg = new_threadblock_graph(grid, (128, 1, 1), forloop)
    bq = bg.new_input(q, (1, -1, 0), -1)
    bk = bg.new_input(k, (1, 3, 0), 3)
    bv = bg.new_input(v, (1, 2, 0), 2)
    e = bg.exp(bg.matmul(bq, bk))
    acc_o = bg.forloop_accum(bg.matmul(e, bv))
    acc_s = bg.forloop_accum(bg.reduction(e, 3))
    bg.new_output(acc_o, (1, 3, 0))
    bg.new_output(acc_s, (1, 3, 0))
    partial_o, partial_s = g.customized([q, k, v], bg)

    cg = new_threadblock_graph((2, 4, batch), (128, 1, 1), splits)
    po = cg.new_input(partial_o, (1, 2, 0), 3)
    ps = cg.new_input(partial_s, (1, 2, 0), 3)
    out = cg.div(cg.forloop_accum(po), cg.forloop_accum(ps))
    cg.new_output(out, (1, 2, 0))
    (o,) = g.customized([partial_o, partial_s], cg)
    g.mark_output(o)
    return g.module()


def build_rmsnorm_linear_fused(
    batch: int, scale: int = 1, blocks: int = 64, forloop: int = 64
) -> ModuleOp:
    """RMSNorm fused into the matmul: the scale is applied after accumulation.

    Each block owns a slice of W's columns and loops over the reduction dim,
    accumulating X·W and the RMS of X's rows at once; one division at the end.
    """
    g = new_kernel_graph("rmsnorm_linear")
    d = 4096 // scale
    x = g.new_input((2 * batch, d), float16)
    w = g.new_input((d, d), float16)
    bg = new_threadblock_graph((blocks, 1, 1), (128, 1, 1), forloop)
    bx = bg.new_input(x, (-1, -1, -1), 1)
    bw = bg.new_input(w, (1, -1, -1), 0)
    acc = bg.forloop_accum(bg.matmul(bx, bw))
    norm = bg.forloop_accum(bx, "rms")
    bg.new_output(bg.div(acc, norm), (1, -1, -1))
    (o,) = g.customized([x, w], bg)
    g.mark_output(o)
    return g.module()


def _div_down(n: int, at_most: int) -> int:
    """The largest divisor of ``n`` not above ``at_most`` (tiles must divide)."""
    return max(d for d in range(1, min(n, at_most) + 1) if n % d == 0)


def build_gqa_single_kernel(batch: int, scale: int = 1) -> ModuleOp:
    """GQA as one kernel: each block owns a slice of queries of one head and
    loops over *all* keys, accumulating exp(QK)V and the row sums of exp(QK);
    one division after the loop (softmax normalisation moved past the matmul).
    """
    g = new_kernel_graph("gqa")
    q, k, v = _gqa_inputs(g, batch, scale)
    queries, keys = 256 // scale, 4096 // scale
    bg = new_threadblock_graph((2, _div_down(queries, 4), batch), (128, 1, 1), 16)
    bq = bg.new_input(q, (1, 2, 0), -1)
    bk = bg.new_input(k, (1, -1, 0), 3)
    bv = bg.new_input(v, (1, -1, 0), 2)
    assert keys % 16 == 0
    e = bg.exp(bg.matmul(bq, bk))
    out = bg.div(
        bg.forloop_accum(bg.matmul(e, bv)), bg.forloop_accum(bg.reduction(e, 3))
    )
    bg.new_output(out, (1, 2, 0))
    (o,) = g.customized([q, k, v], bg)
    g.mark_output(o)
    return g.module()


def build_qknorm_gqa_fused(batch: int, scale: int = 1) -> ModuleOp:
    """QK-norm GQA as one kernel: Q rows are normalised once per block, each
    V tile is normalised as it is loaded, then as :func:`build_gqa_single_kernel`.
    """
    g = new_kernel_graph("qknorm_gqa")
    q, k, v = _gqa_inputs(g, batch, scale)
    queries = 256 // scale
    bg = new_threadblock_graph((2, _div_down(queries, 4), batch), (128, 1, 1), 16)
    bq = bg.rms_norm(bg.new_input(q, (1, 2, 0), -1))
    bk = bg.new_input(k, (1, -1, 0), 3)
    bv = bg.rms_norm(bg.new_input(v, (1, -1, 0), 2))
    e = bg.exp(bg.matmul(bq, bk))
    out = bg.div(
        bg.forloop_accum(bg.matmul(e, bv)), bg.forloop_accum(bg.reduction(e, 3))
    )
    bg.new_output(out, (1, 2, 0))
    (o,) = g.customized([q, k, v], bg)
    g.mark_output(o)
    return g.module()


def build_rmsnorm_linear_splitk(
    batch: int, scale: int = 1, splits: int = 4, blocks: int = 32
) -> ModuleOp:
    """RMSNorm + linear with the reduction dim split across blocks (split-K).

    Kernel 1: block (column slice, split) accumulates its share of X·W; the
    partial products are stacked along the rows. Kernel 2 loops over the
    splits summing the partials, accumulates the RMS of X alongside, and
    divides once.
    """
    g = new_kernel_graph("rmsnorm_linear")
    d = 4096 // scale
    x = g.new_input((2 * batch, d), float16)
    w = g.new_input((d, d), float16)
    blocks = _div_down(d, blocks)
    forloop = _div_down(d // splits, 16)
    bg = new_threadblock_graph((blocks, splits, 1), (128, 1, 1), forloop)
    bx = bg.new_input(x, (-1, 1, -1), 1)
    bw = bg.new_input(w, (1, 0, -1), 0)
    bg.new_output(bg.forloop_accum(bg.matmul(bx, bw)), (1, 0, -1))
    (partial,) = g.customized([x, w], bg)

    cg = new_threadblock_graph((blocks, 1, 1), (128, 1, 1), splits)
    bp = cg.new_input(partial, (1, -1, -1), 0)
    cx = cg.new_input(x, (-1, -1, -1), 1)
    cg.new_output(
        cg.div(cg.forloop_accum(bp), cg.forloop_accum(cx, "rms")), (1, -1, -1)
    )
    (o,) = g.customized([partial, x], cg)
    g.mark_output(o)
    return g.module()


def _lora_inputs(g: KernelGraph, batch: int, scale: int):
    d_in, d_out, rank = 256 // scale, 4096 // scale, 16
    x = g.new_input((batch, d_in), float16)
    w = g.new_input((d_in, d_out), float16)
    a = g.new_input((d_in, rank), float16)
    b = g.new_input((rank, d_out), float16)
    return x, w, a, b


def build_lora_fused(batch: int, scale: int = 1, blocks: int = 64) -> ModuleOp:
    """LoRA as one kernel via concatenation: concat(X, X·A) · concat(W, B).

    Every block recomputes the small X·A (rank 16) in shared memory, then one
    matmul over the concatenated contraction dim gives X·W + (X·A)·B for its
    slice of columns.
    """
    g = new_kernel_graph("lora")
    x, w, a, b = _lora_inputs(g, batch, scale)
    blocks = _div_down(4096 // scale, blocks)
    bg = new_threadblock_graph((blocks, 1, 1), (128, 1, 1), 1)
    bx = bg.new_input(x, (-1, -1, -1), -1)
    ba = bg.new_input(a, (-1, -1, -1), -1)
    bw = bg.new_input(w, (1, -1, -1), -1)
    bb = bg.new_input(b, (1, -1, -1), -1)
    lhs = bg.concat(bx, bg.matmul(bx, ba), 1)
    rhs = bg.concat(bw, bb, 0)
    bg.new_output(bg.matmul(lhs, rhs), (1, -1, -1))
    (o,) = g.customized([x, w, a, b], bg)
    g.mark_output(o)
    return g.module()


def build_lora_concat(
    batch: int, scale: int = 1, blocks: int = 64, forloop: int = 4
) -> ModuleOp:
    """LoRA in two kernels: X·A first, then one for-loop over the concatenated
    contraction dim; each iteration pairs a slice of X with a slice of X·A."""
    g = new_kernel_graph("lora")
    x, w, a, b = _lora_inputs(g, batch, scale)
    ag = new_threadblock_graph((1, 1, 1), (128, 1, 1), 1)
    ag.new_output(
        ag.matmul(ag.new_input(x, (-1, -1, -1)), ag.new_input(a, (-1, -1, -1))),
        (-1, -1, -1),
    )
    (xa,) = g.customized([x, a], ag)
    blocks = _div_down(4096 // scale, blocks)
    bg = new_threadblock_graph((blocks, 1, 1), (128, 1, 1), forloop)
    lhs = bg.concat(
        bg.new_input(x, (-1, -1, -1), 1), bg.new_input(xa, (-1, -1, -1), 1), 1
    )
    rhs = bg.concat(bg.new_input(w, (1, -1, -1), 0), bg.new_input(b, (1, -1, -1), 0), 0)
    bg.new_output(bg.forloop_accum(bg.matmul(lhs, rhs)), (1, -1, -1))
    (o,) = g.customized([x, xa, w, b], bg)
    g.mark_output(o)
    return g.module()


def _gated_inputs(g: KernelGraph, batch: int, scale: int):
    d = 4096 // scale
    return (
        g.new_input((batch, d), float16),
        g.new_input((d, d), float16),
        g.new_input((d, d), float16),
    )


def build_gated_mlp_fused(
    batch: int, scale: int = 1, blocks: int = 64, forloop: int = 64
) -> ModuleOp:
    """Gated MLP as one kernel: both matmuls accumulate over one for-loop over
    the reduction dim; silu and the gating product run once after the loop."""
    g = new_kernel_graph("gated_mlp")
    x, a, b = _gated_inputs(g, batch, scale)
    d = 4096 // scale
    blocks, forloop = _div_down(d, blocks), _div_down(d, forloop)
    bg = new_threadblock_graph((blocks, 1, 1), (128, 1, 1), forloop)
    bx = bg.new_input(x, (-1, -1, -1), 1)
    gate = bg.forloop_accum(bg.matmul(bx, bg.new_input(a, (1, -1, -1), 0)))
    up = bg.forloop_accum(bg.matmul(bx, bg.new_input(b, (1, -1, -1), 0)))
    bg.new_output(bg.mul(bg.silu(gate), up), (1, -1, -1))
    (o,) = g.customized([x, a, b], bg)
    g.mark_output(o)
    return g.module()


def build_gated_mlp_splitk(
    batch: int, scale: int = 1, blocks: int = 32, splits: int = 4
) -> ModuleOp:
    """Gated MLP split-K: kernel 1 accumulates both partial products per
    (column slice, split), stacked along the rows; kernel 2 sums the splits and
    applies silu and the gate."""
    g = new_kernel_graph("gated_mlp")
    x, a, b = _gated_inputs(g, batch, scale)
    d = 4096 // scale
    blocks = _div_down(d, blocks)
    forloop = _div_down(d // splits, 16)
    bg = new_threadblock_graph((blocks, splits, 1), (128, 1, 1), forloop)
    bx = bg.new_input(x, (-1, 1, -1), 1)
    for weight in (a, b):
        acc = bg.forloop_accum(bg.matmul(bx, bg.new_input(weight, (1, 0, -1), 0)))
        bg.new_output(acc, (1, 0, -1))
    gate, up = g.customized([x, a, b], bg)

    cg = new_threadblock_graph((blocks, 1, 1), (128, 1, 1), splits)
    sg = cg.forloop_accum(cg.new_input(gate, (1, -1, -1), 0))
    su = cg.forloop_accum(cg.new_input(up, (1, -1, -1), 0))
    cg.new_output(cg.mul(cg.silu(sg), su), (1, -1, -1))
    (o,) = g.customized([gate, up], cg)
    g.mark_output(o)
    return g.module()


def build_norm_transformer_fused(batch: int, scale: int = 1) -> ModuleOp:
    """Both outputs of the norm/residual block in one kernel, one row per block."""
    g = new_kernel_graph("norm_transformer")
    d = 4096 // scale
    x, h, alpha = (g.new_input((batch, d), float16) for _ in range(3))
    bg = new_threadblock_graph((batch, 1, 1), (128, 1, 1), 1)
    bx = bg.new_input(x, (0, -1, -1))
    bh = bg.new_input(h, (0, -1, -1))
    ba = bg.new_input(alpha, (0, -1, -1))
    bg.new_output(bg.add(bg.rms_norm(bh), bx), (0, -1, -1))
    bg.new_output(bg.rms_norm(bg.add(bx, bg.mul(ba, bx))), (0, -1, -1))
    o1, o2 = g.customized([x, h, alpha], bg)
    g.mark_output(o1)
    g.mark_output(o2)
    return g.module()


# --- kernel-level algebraic rewrites -------------------------------------------


def build_gqa_div_after_matmul(batch: int, scale: int = 1) -> ModuleOp:
    """softmax(QK)·V as (exp(QK)·V) / sum(exp(QK)): normalise after the matmul."""
    g = new_kernel_graph("gqa")
    q, k, v = _gqa_inputs(g, batch, scale)
    e = g.exp(g.matmul(q, k))
    g.mark_output(g.div(g.matmul(e, v), g.reduction(e, 3)))
    return g.module()


def build_qknorm_gqa_div_after_matmul(batch: int, scale: int = 1) -> ModuleOp:
    g = new_kernel_graph("qknorm_gqa")
    q, k, v = _gqa_inputs(g, batch, scale)
    e = g.exp(g.matmul(g.rms_norm(q), k))
    g.mark_output(g.div(g.matmul(e, g.rms_norm(v)), g.reduction(e, 3)))
    return g.module()


def build_lora_distributed(batch: int, scale: int = 1) -> ModuleOp:
    """X·W + (X·A)·B as X·(W + A·B)."""
    g = new_kernel_graph("lora")
    x, w, a, b = _lora_inputs(g, batch, scale)
    g.mark_output(g.matmul(x, g.add(w, g.matmul(a, b))))
    return g.module()


def build_lora_reassociated(batch: int, scale: int = 1) -> ModuleOp:
    """X·W + X·(A·B): the low-rank product associated the other way."""
    g = new_kernel_graph("lora")
    x, w, a, b = _lora_inputs(g, batch, scale)
    g.mark_output(g.add(g.matmul(x, w), g.matmul(x, g.matmul(a, b))))
    return g.module()


def build_gated_mlp_commuted(batch: int, scale: int = 1) -> ModuleOp:
    """(X·B) ∘ silu(X·A): the gate product with its factors swapped."""
    g = new_kernel_graph("gated_mlp")
    x, a, b = _gated_inputs(g, batch, scale)
    g.mark_output(g.mul(g.matmul(x, b), g.silu(g.matmul(x, a))))
    return g.module()


def build_norm_transformer_commuted(batch: int, scale: int = 1) -> ModuleOp:
    """X + RMSNorm(H) and RMSNorm(alpha ∘ X + X)."""
    g = new_kernel_graph("norm_transformer")
    d = 4096 // scale
    x, h, alpha = (g.new_input((batch, d), float16) for _ in range(3))
    g.mark_output(g.add(x, g.rms_norm(h)))
    g.mark_output(g.rms_norm(g.add(g.mul(x, alpha), x)))
    return g.module()


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("gqa", "softmax(Q·K)·V, grouped-query attention", build_gqa, ref_gqa),
        Workload(
            "qknorm_gqa",
            "RMSNorm of Q and V, then GQA",
            build_qknorm_gqa,
            ref_qknorm_gqa,
        ),
        Workload(
            "rmsnorm_linear", "RMSNorm(X)·W", build_rmsnorm_linear, ref_rmsnorm_linear
        ),
        Workload("lora", "X·W + (X·A)·B", build_lora, ref_lora),
        Workload("gated_mlp", "silu(X·A) ∘ (X·B)", build_gated_mlp, ref_gated_mlp),
        Workload(
            "norm_transformer",
            "RMSNorm(H) + X and RMSNorm(X + alpha ∘ X)",
            build_norm_transformer,
            ref_norm_transformer,
        ),
    )
}

HANDWRITTEN: dict[str, tuple[str, Callable[..., ModuleOp]]] = {
    "gqa_flashdecoding": ("gqa", build_gqa_flashdecoding),
    "rmsnorm_linear_fused": ("rmsnorm_linear", build_rmsnorm_linear_fused),
    "gqa_single_kernel": ("gqa", build_gqa_single_kernel),
    "qknorm_gqa_fused": ("qknorm_gqa", build_qknorm_gqa_fused),
    "rmsnorm_linear_splitk": ("rmsnorm_linear", build_rmsnorm_linear_splitk),
    "lora_fused": ("lora", build_lora_fused),
    "lora_concat": ("lora", build_lora_concat),
    "gated_mlp_fused": ("gated_mlp", build_gated_mlp_fused),
    "gated_mlp_splitk": ("gated_mlp", build_gated_mlp_splitk),
    "norm_transformer_fused": ("norm_transformer", build_norm_transformer_fused),
}
"""Hand-written µGraph name -> (the workload it implements, its builder)."""

ALGEBRAIC: dict[str, tuple[str, Callable[..., ModuleOp]]] = {
    "gqa_div_after_matmul": ("gqa", build_gqa_div_after_matmul),
    "qknorm_gqa_div_after_matmul": ("qknorm_gqa", build_qknorm_gqa_div_after_matmul),
    "lora_distributed": ("lora", build_lora_distributed),
    "lora_reassociated": ("lora", build_lora_reassociated),
    "gated_mlp_commuted": ("gated_mlp", build_gated_mlp_commuted),
    "norm_transformer_commuted": ("norm_transformer", build_norm_transformer_commuted),
}
"""Kernel-level programs equal to a workload by algebra (name -> (workload, builder))."""
