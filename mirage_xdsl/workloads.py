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

from mirage_xdsl.graph import (
    KernelGraph,
    float16,
    new_kernel_graph,
    new_threadblock_graph,
)

BATCHES = (1, 8)


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    build: Callable[[int, int], ModuleOp]
    reference: Callable[..., list[np.ndarray]]

    def module(self, batch: int = 1, scale: int = 1) -> ModuleOp:
        return self.build(batch, scale)


def input_shapes(module: ModuleOp) -> list[tuple[int, ...]]:
    from mirage_xdsl.interpreter import entry_function

    fn = entry_function(module)
    return [tuple(t.get_shape()) for t in fn.function_type.inputs.data]  # type: ignore[attr-defined]


def random_inputs(
    module: ModuleOp, seed: int = 0, low: float = -1.0, high: float = 1.0
) -> list[np.ndarray]:
    """fp16 inputs drawn uniformly; small magnitudes keep exp() in fp16 range."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(low, high, s).astype(np.float16) for s in input_shapes(module)]


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
}
"""Hand-written µGraph name -> (the workload it implements, its builder)."""
