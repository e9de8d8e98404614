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
from xdsl.ir import SSAValue

from mirage_xdsl.ir.builder import (
    BlockGraph,
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


def _dims(scale: int) -> tuple[int, int]:
    """The benchmarks' small and large dims (256 and 4096) divided by ``scale``.

    Queries and LoRA's input width are small; keys, hidden and output widths
    large. Hand-written µGraphs size their grids from the same numbers.
    """
    return 256 // scale, 4096 // scale


def _input_shapes(workload: str, batch: int, scale: int) -> list[tuple[int, ...]]:
    """The f16 input shapes of ``workload``, in argument order.

    Every program of a workload (the original, the hand-written µGraphs and
    the algebraic rewrites) declares its inputs from here, so they cannot
    disagree about what they are given.
    """
    small, large = _dims(scale)
    match workload:
        case "gqa" | "qknorm_gqa":
            queries, keys = small, large
            q = (batch, 2, queries, 64)
            return [q, (batch, 2, 64, keys), (batch, 2, keys, 64)]
        case "rmsnorm_linear":
            return [(2 * batch, large), (large, large)]
        case "lora":
            d_in, d_out, rank = small, large, 16
            return [(batch, d_in), (d_in, d_out), (d_in, rank), (rank, d_out)]
        case "gated_mlp":
            return [(batch, large), (large, large), (large, large)]
        case "norm_transformer":
            return [(batch, large)] * 3
        case _:
            raise KeyError(workload)


def _program(
    workload: str, batch: int, scale: int
) -> tuple[KernelGraph, list[SSAValue]]:
    """A kernel graph for a program of ``workload``: named after it, inputs declared."""
    g = new_kernel_graph(workload)
    return g, [g.new_input(s, float16) for s in _input_shapes(workload, batch, scale)]


def _finish(g: KernelGraph, *outputs: SSAValue) -> ModuleOp:
    """The module of ``g`` returning ``outputs``, in order."""
    for o in outputs:
        g.mark_output(o)
    return g.module()


def _attention(g: KernelGraph, q: SSAValue, k: SSAValue, v: SSAValue) -> SSAValue:
    e = g.exp(g.matmul(q, k))
    return g.matmul(g.div(e, g.reduction(e, 3)), v)


def build_gqa(batch: int, scale: int = 1) -> ModuleOp:
    g, (q, k, v) = _program("gqa", batch, scale)
    return _finish(g, _attention(g, q, k, v))


def build_qknorm_gqa(batch: int, scale: int = 1) -> ModuleOp:
    g, (q, k, v) = _program("qknorm_gqa", batch, scale)
    return _finish(g, _attention(g, g.rms_norm(q), k, g.rms_norm(v)))


def build_rmsnorm_linear(batch: int, scale: int = 1) -> ModuleOp:
    g, (x, w) = _program("rmsnorm_linear", batch, scale)
    return _finish(g, g.matmul(g.rms_norm(x), w))


def build_lora(batch: int, scale: int = 1) -> ModuleOp:
    g, (x, w, a, b) = _program("lora", batch, scale)
    return _finish(g, g.add(g.matmul(x, w), g.matmul(g.matmul(x, a), b)))


def build_gated_mlp(batch: int, scale: int = 1) -> ModuleOp:
    g, (x, a, b) = _program("gated_mlp", batch, scale)
    return _finish(g, g.mul(g.silu(g.matmul(x, a)), g.matmul(x, b)))


def build_norm_transformer(batch: int, scale: int = 1) -> ModuleOp:
    g, (x, h, alpha) = _program("norm_transformer", batch, scale)
    return _finish(g, g.add(g.rms_norm(h), x), g.rms_norm(g.add(x, g.mul(alpha, x))))


# --- hand-written µGraphs ----------------------------------------------------


def _div_down(n: int, at_most: int) -> int:
    """The largest divisor of ``n`` not above ``at_most`` (tiles must divide)."""
    return max(d for d in range(1, min(n, at_most) + 1) if n % d == 0)


def _attention_sums(
    bg: BlockGraph, q: SSAValue, k: SSAValue, v: SSAValue
) -> tuple[SSAValue, SSAValue]:
    """The for-loop sums of exp(QK)·V and of the rows of exp(QK).

    Softmax's division commutes with the matmul by V, so a block accumulates
    both sums and divides once, after its loop or in a combining kernel.
    """
    e = bg.exp(bg.matmul(q, k))
    return bg.forloop_accum(bg.matmul(e, v)), bg.forloop_accum(bg.reduction(e, 3))


def _splitk_products(
    g: KernelGraph,
    x: SSAValue,
    weights: list[SSAValue],
    blocks: int,
    splits: int,
    depth: int,
) -> list[SSAValue]:
    """Kernel 1 of a split-K matmul: the partial products X·W of each weight.

    Block (column slice, split) accumulates its share of the reduction dim
    (of size ``depth``); the partials of the splits are stacked along the rows,
    for a second kernel to sum.
    """
    bg = new_threadblock_graph(
        (blocks, splits, 1), forloop_range=_div_down(depth // splits, 16)
    )
    bx = bg.new_input(x, (-1, 1, -1), 1)
    for w in weights:
        acc = bg.forloop_accum(bg.matmul(bx, bg.new_input(w, (1, 0, -1), 0)))
        bg.new_output(acc, (1, 0, -1))
    return g.customized([x, *weights], bg)


def build_gqa_flashdecoding(
    batch: int, scale: int = 1, splits: int = 16, forloop: int = 4
) -> ModuleOp:
    """GQA as a FlashDecoding-style µGraph: two customized kernels.

    Kernel 1: block (head, key split, batch) loops over its share of the keys,
    accumulating exp(QK)V and the row sums of exp(QK); each block writes its
    partial results side by side along the last dim. Kernel 2 loops over the
    splits, sums the partials and divides.
    """
    g, (q, k, v) = _program("gqa", batch, scale)
    bg = new_threadblock_graph((2, splits, batch), forloop_range=forloop)
    bq = bg.new_input(q, (1, -1, 0), -1)
    bk = bg.new_input(k, (1, 3, 0), 3)
    bv = bg.new_input(v, (1, 2, 0), 2)
    acc_o, acc_s = _attention_sums(bg, bq, bk, bv)
    bg.new_output(acc_o, (1, 3, 0))
    bg.new_output(acc_s, (1, 3, 0))
    partial_o, partial_s = g.customized([q, k, v], bg)

    cg = new_threadblock_graph((2, 4, batch), forloop_range=splits)
    po = cg.new_input(partial_o, (1, 2, 0), 3)
    ps = cg.new_input(partial_s, (1, 2, 0), 3)
    cg.new_output(cg.div(cg.forloop_accum(po), cg.forloop_accum(ps)), (1, 2, 0))
    return _finish(g, *g.customized([partial_o, partial_s], cg))


def build_rmsnorm_linear_fused(
    batch: int, scale: int = 1, blocks: int = 64, forloop: int = 64
) -> ModuleOp:
    """RMSNorm fused into the matmul: the scale is applied after accumulation.

    Each block owns a slice of W's columns and loops over the reduction dim,
    accumulating X·W and the RMS of X's rows at once; one division at the end.
    """
    g, (x, w) = _program("rmsnorm_linear", batch, scale)
    bg = new_threadblock_graph((blocks, 1, 1), forloop_range=forloop)
    bx = bg.new_input(x, (-1, -1, -1), 1)
    bw = bg.new_input(w, (1, -1, -1), 0)
    acc = bg.forloop_accum(bg.matmul(bx, bw))
    norm = bg.forloop_accum(bx, "rms")
    bg.new_output(bg.div(acc, norm), (1, -1, -1))
    return _finish(g, *g.customized([x, w], bg))


def _unchanged(value: SSAValue) -> SSAValue:
    return value


def _gqa_one_kernel(batch: int, scale: int, qknorm: bool) -> ModuleOp:
    """GQA (with ``qknorm``, QK-norm GQA) as one kernel.

    Each block owns a slice of queries of one head and loops over *all* keys;
    with ``qknorm`` its Q rows are normalised once and each V tile as it is
    loaded.
    """
    g, (q, k, v) = _program("qknorm_gqa" if qknorm else "gqa", batch, scale)
    queries, _ = _dims(scale)
    bg = new_threadblock_graph((2, _div_down(queries, 4), batch), forloop_range=16)
    norm = bg.rms_norm if qknorm else _unchanged
    bq = norm(bg.new_input(q, (1, 2, 0), -1))
    bk = bg.new_input(k, (1, -1, 0), 3)
    bv = norm(bg.new_input(v, (1, -1, 0), 2))
    bg.new_output(bg.div(*_attention_sums(bg, bq, bk, bv)), (1, 2, 0))
    return _finish(g, *g.customized([q, k, v], bg))


def build_gqa_online_softmax(batch: int, scale: int = 1) -> ModuleOp:
    """GQA as one kernel with the online softmax: no exp overflows.

    As :func:`build_gqa_single_kernel`, but each iteration takes the row
    maximum ``m`` of its scores and exponentiates ``Q·K - m``; the two
    accumulators are shifted by ``m``, so the kernel keeps the running maximum
    and rescales what it has summed whenever it grows. The quotient is the
    plain program's softmax, which the verifier proves whatever the maxima are.
    """
    g, (q, k, v) = _program("gqa", batch, scale)
    queries, _ = _dims(scale)
    bg = new_threadblock_graph((2, _div_down(queries, 4), batch), forloop_range=16)
    bq = bg.new_input(q, (1, 2, 0), -1)
    bk = bg.new_input(k, (1, -1, 0), 3)
    bv = bg.new_input(v, (1, -1, 0), 2)
    scores = bg.matmul(bq, bk)
    top = bg.reduce_max(scores, 3)
    e = bg.exp(bg.add(scores, bg.neg(top)))
    acc_o = bg.forloop_accum(bg.matmul(e, bv), shift=top)
    acc_s = bg.forloop_accum(e, "sum", shift=top)
    bg.new_output(bg.div(acc_o, acc_s), (1, 2, 0))
    return _finish(g, *g.customized([q, k, v], bg))


def build_gqa_single_kernel(batch: int, scale: int = 1) -> ModuleOp:
    """GQA as one kernel: each block owns a slice of queries of one head and
    loops over *all* keys, accumulating exp(QK)V and the row sums of exp(QK);
    one division after the loop (softmax normalisation moved past the matmul).
    """
    return _gqa_one_kernel(batch, scale, qknorm=False)


def build_qknorm_gqa_fused(batch: int, scale: int = 1) -> ModuleOp:
    """QK-norm GQA as one kernel: Q rows are normalised once per block, each
    V tile is normalised as it is loaded, then as :func:`build_gqa_single_kernel`.
    """
    return _gqa_one_kernel(batch, scale, qknorm=True)


def build_rmsnorm_linear_splitk(
    batch: int, scale: int = 1, splits: int = 4, blocks: int = 32
) -> ModuleOp:
    """RMSNorm + linear with the reduction dim split across blocks (split-K).

    Kernel 1: block (column slice, split) accumulates its share of X·W; the
    partial products are stacked along the rows. Kernel 2 loops over the
    splits summing the partials, accumulates the RMS of X alongside, and
    divides once.
    """
    g, (x, w) = _program("rmsnorm_linear", batch, scale)
    _, d = _dims(scale)
    blocks = _div_down(d, blocks)
    (partial,) = _splitk_products(g, x, [w], blocks, splits, d)

    cg = new_threadblock_graph((blocks, 1, 1), forloop_range=splits)
    bp = cg.new_input(partial, (1, -1, -1), 0)
    cx = cg.new_input(x, (-1, -1, -1), 1)
    cg.new_output(
        cg.div(cg.forloop_accum(bp), cg.forloop_accum(cx, "rms")), (1, -1, -1)
    )
    return _finish(g, *g.customized([partial, x], cg))


def build_lora_fused(batch: int, scale: int = 1, blocks: int = 64) -> ModuleOp:
    """LoRA as one kernel via concatenation: concat(X, X·A) · concat(W, B).

    Every block recomputes the small X·A (rank 16) in shared memory, then one
    matmul over the concatenated contraction dim gives X·W + (X·A)·B for its
    slice of columns.
    """
    g, (x, w, a, b) = _program("lora", batch, scale)
    _, d_out = _dims(scale)
    bg = new_threadblock_graph((_div_down(d_out, blocks), 1, 1))
    bx = bg.new_input(x, (-1, -1, -1), -1)
    ba = bg.new_input(a, (-1, -1, -1), -1)
    bw = bg.new_input(w, (1, -1, -1), -1)
    bb = bg.new_input(b, (1, -1, -1), -1)
    lhs = bg.concat(bx, bg.matmul(bx, ba), 1)
    rhs = bg.concat(bw, bb, 0)
    bg.new_output(bg.matmul(lhs, rhs), (1, -1, -1))
    return _finish(g, *g.customized([x, w, a, b], bg))


def build_lora_concat(
    batch: int, scale: int = 1, blocks: int = 64, forloop: int = 4
) -> ModuleOp:
    """LoRA in two kernels: X·A first, then one for-loop over the concatenated
    contraction dim; each iteration pairs a slice of X with a slice of X·A."""
    g, (x, w, a, b) = _program("lora", batch, scale)
    ag = new_threadblock_graph((1, 1, 1))
    ag.new_output(
        ag.matmul(ag.new_input(x, (-1, -1, -1)), ag.new_input(a, (-1, -1, -1))),
        (-1, -1, -1),
    )
    (xa,) = g.customized([x, a], ag)
    _, d_out = _dims(scale)
    bg = new_threadblock_graph((_div_down(d_out, blocks), 1, 1), forloop_range=forloop)
    lhs = bg.concat(
        bg.new_input(x, (-1, -1, -1), 1), bg.new_input(xa, (-1, -1, -1), 1), 1
    )
    rhs = bg.concat(bg.new_input(w, (1, -1, -1), 0), bg.new_input(b, (1, -1, -1), 0), 0)
    bg.new_output(bg.forloop_accum(bg.matmul(lhs, rhs)), (1, -1, -1))
    return _finish(g, *g.customized([x, xa, w, b], bg))


def build_gated_mlp_fused(
    batch: int, scale: int = 1, blocks: int = 64, forloop: int = 64
) -> ModuleOp:
    """Gated MLP as one kernel: both matmuls accumulate over one for-loop over
    the reduction dim; silu and the gating product run once after the loop."""
    g, (x, a, b) = _program("gated_mlp", batch, scale)
    _, d = _dims(scale)
    bg = new_threadblock_graph(
        (_div_down(d, blocks), 1, 1), forloop_range=_div_down(d, forloop)
    )
    bx = bg.new_input(x, (-1, -1, -1), 1)
    gate = bg.forloop_accum(bg.matmul(bx, bg.new_input(a, (1, -1, -1), 0)))
    up = bg.forloop_accum(bg.matmul(bx, bg.new_input(b, (1, -1, -1), 0)))
    bg.new_output(bg.mul(bg.silu(gate), up), (1, -1, -1))
    return _finish(g, *g.customized([x, a, b], bg))


def build_gated_mlp_splitk(
    batch: int, scale: int = 1, blocks: int = 32, splits: int = 4
) -> ModuleOp:
    """Gated MLP split-K: kernel 1 accumulates both partial products per
    (column slice, split), stacked along the rows; kernel 2 sums the splits and
    applies silu and the gate."""
    g, (x, a, b) = _program("gated_mlp", batch, scale)
    _, d = _dims(scale)
    blocks = _div_down(d, blocks)
    gate, up = _splitk_products(g, x, [a, b], blocks, splits, d)

    cg = new_threadblock_graph((blocks, 1, 1), forloop_range=splits)
    sg = cg.forloop_accum(cg.new_input(gate, (1, -1, -1), 0))
    su = cg.forloop_accum(cg.new_input(up, (1, -1, -1), 0))
    cg.new_output(cg.mul(cg.silu(sg), su), (1, -1, -1))
    return _finish(g, *g.customized([gate, up], cg))


def build_norm_transformer_fused(batch: int, scale: int = 1) -> ModuleOp:
    """Both outputs of the norm/residual block in one kernel, one row per block."""
    g, (x, h, alpha) = _program("norm_transformer", batch, scale)
    bg = new_threadblock_graph((batch, 1, 1))
    bx = bg.new_input(x, (0, -1, -1))
    bh = bg.new_input(h, (0, -1, -1))
    ba = bg.new_input(alpha, (0, -1, -1))
    bg.new_output(bg.add(bg.rms_norm(bh), bx), (0, -1, -1))
    bg.new_output(bg.rms_norm(bg.add(bx, bg.mul(ba, bx))), (0, -1, -1))
    return _finish(g, *g.customized([x, h, alpha], bg))


# --- kernel-level algebraic rewrites -------------------------------------------


def build_gqa_div_after_matmul(batch: int, scale: int = 1) -> ModuleOp:
    """softmax(QK)·V as (exp(QK)·V) / sum(exp(QK)): normalise after the matmul."""
    g, (q, k, v) = _program("gqa", batch, scale)
    e = g.exp(g.matmul(q, k))
    return _finish(g, g.div(g.matmul(e, v), g.reduction(e, 3)))


def build_qknorm_gqa_div_after_matmul(batch: int, scale: int = 1) -> ModuleOp:
    g, (q, k, v) = _program("qknorm_gqa", batch, scale)
    e = g.exp(g.matmul(g.rms_norm(q), k))
    return _finish(g, g.div(g.matmul(e, g.rms_norm(v)), g.reduction(e, 3)))


def build_lora_distributed(batch: int, scale: int = 1) -> ModuleOp:
    """X·W + (X·A)·B as X·(W + A·B)."""
    g, (x, w, a, b) = _program("lora", batch, scale)
    return _finish(g, g.matmul(x, g.add(w, g.matmul(a, b))))


def build_lora_reassociated(batch: int, scale: int = 1) -> ModuleOp:
    """X·W + X·(A·B): the low-rank product associated the other way."""
    g, (x, w, a, b) = _program("lora", batch, scale)
    return _finish(g, g.add(g.matmul(x, w), g.matmul(x, g.matmul(a, b))))


def build_gated_mlp_commuted(batch: int, scale: int = 1) -> ModuleOp:
    """(X·B) ∘ silu(X·A): the gate product with its factors swapped."""
    g, (x, a, b) = _program("gated_mlp", batch, scale)
    return _finish(g, g.mul(g.matmul(x, b), g.silu(g.matmul(x, a))))


def build_norm_transformer_commuted(batch: int, scale: int = 1) -> ModuleOp:
    """X + RMSNorm(H) and RMSNorm(alpha ∘ X + X)."""
    g, (x, h, alpha) = _program("norm_transformer", batch, scale)
    return _finish(g, g.add(x, g.rms_norm(h)), g.rms_norm(g.add(g.mul(x, alpha), x)))


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
    "gqa_online_softmax": ("gqa", build_gqa_online_softmax),
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
