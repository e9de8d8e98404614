"""Softmax programs with and without the row maximum subtracted.

Shared by the verifier tests (``tests/test_verify.py``), the lowering tests of
both backends (``tests/test_lowering.py``, ``tests/test_triton.py``) and
``tests/triton_interpret.py``:

- :func:`softmax_module`: ``exp(x) / sum(exp(x))`` over the last dim, plain or
  safe (``exp(x - max(x)) / sum(exp(x - max(x)))``), as kernel ops;
- :func:`blocked_softmax_module`: the safe softmax as one customized kernel
  whose blocks own whole rows, optionally with its element-wise chain fused
  into a thread graph;
- :func:`attention_module`: ``softmax(Q·K)·V``, plain or safe;
- :func:`online_attention_module`: the same as one customized kernel that
  loops over the keys with the online softmax (shifted accumulations), and
  :func:`reference_attention`, its exact answer.

Row lengths need not be powers of two (Triton pads them) and may be shorter
than a warp (the CUDA lowering then gives each row to one thread).
"""

from __future__ import annotations

import numpy as np
from activation_program import finished
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from mirage_xdsl.ir.builder import (
    BlockGraph,
    KernelGraph,
    new_kernel_graph,
    new_threadblock_graph,
)


def _softmax(g: KernelGraph | BlockGraph, x: SSAValue, dim: int, safe: bool):
    if safe:
        x = g.add(x, g.neg(g.reduce_max(x, dim)))
    e = g.exp(x)
    return g.div(e, g.reduce_sum(e, dim))


def softmax_module(shape=(8, 100), safe: bool = True) -> ModuleOp:
    g = new_kernel_graph("safe_softmax" if safe else "softmax")
    x = g.new_input(shape)
    g.mark_output(_softmax(g, x, len(shape) - 1, safe))
    return g.module()


def blocked_softmax_module(
    shape=(8, 100), grid: int = 2, fused: bool = False
) -> ModuleOp:
    """The safe softmax as one customized kernel: ``grid`` blocks along the
    rows, each with its rows whole."""
    g = new_kernel_graph("safe_softmax_kernel")
    x = g.new_input(shape)
    bg = new_threadblock_graph((grid, 1, 1), (128, 1, 1), 1)
    bx = bg.new_input(x, (0, -1, -1), -1)
    bg.new_output(_softmax(bg, bx, len(shape) - 1, True), (0, -1, -1))
    (out,) = g.customized([x], bg)
    g.mark_output(out)
    return finished(g, fused)


def attention_module(
    batch: int = 2, queries: int = 16, keys: int = 64, head: int = 16, safe=True
) -> ModuleOp:
    g = new_kernel_graph("safe_attention" if safe else "attention")
    q = g.new_input((batch, queries, head))
    k = g.new_input((batch, head, keys))
    v = g.new_input((batch, keys, head))
    g.mark_output(g.matmul(_softmax(g, g.matmul(q, k), 2, safe), v))
    return g.module()


def online_attention_module(
    batch: int = 2,
    queries: int = 20,
    keys: int = 96,
    head: int = 16,
    forloop: int = 3,
    grid: int = 2,
    shift_sums: bool = True,
) -> ModuleOp:
    """``softmax(Q·K)·V`` as one kernel: ``grid`` blocks of query rows per
    batch, each looping over the keys in ``forloop`` tiles. Each iteration
    exponentiates its scores less their row maximum and both accumulators are
    shifted by it (the online softmax). ``shift_sums=False`` leaves the row
    sums unshifted, a program whose shift does not cancel. The default sizes
    pad every tile in Triton (20 rows, 32 keys, head 16)."""
    g = new_kernel_graph("online_attention")
    q = g.new_input((batch, queries, head))
    k = g.new_input((batch, head, keys))
    v = g.new_input((batch, keys, head))
    bg = new_threadblock_graph((batch, grid, 1), (128, 1, 1), forloop)
    bq = bg.new_input(q, (0, 1, -1), -1)
    bk = bg.new_input(k, (0, -1, -1), 2)
    bv = bg.new_input(v, (0, -1, -1), 1)
    scores = bg.matmul(bq, bk)
    top = bg.reduce_max(scores, 2)
    e = bg.exp(bg.add(scores, bg.neg(top)))
    acc_o = bg.forloop_accum(bg.matmul(e, bv), shift=top)
    acc_s = bg.forloop_accum(e, "sum", shift=top if shift_sums else None)
    bg.new_output(bg.div(acc_o, acc_s), (0, 1, -1))
    (out,) = g.customized([q, k, v], bg)
    g.mark_output(out)
    return g.module()


def reference_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``softmax(Q·K)·V`` in float64, the softmax shifted (the exact answer)."""
    scores = np.asarray(q, np.float64) @ np.asarray(k, np.float64)
    return reference_softmax(scores) @ np.asarray(v, np.float64)


def reference_softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last dim in float64, shifted (the exact answer)."""
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def large_inputs(shape, seed: int = 0, scale: float = 10.0) -> np.ndarray:
    """Normal inputs times ``scale``, rounded to fp16: rows reach |x| > 20,
    where ``exp(x)`` is far beyond fp16's largest finite value (65504)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale).astype(np.float16)
