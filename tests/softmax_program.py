"""Softmax programs with and without the row maximum subtracted.

Shared by the verifier tests (``tests/test_verify.py``), the lowering tests of
both backends (``tests/test_lowering.py``, ``tests/test_triton.py``) and
``tests/triton_interpret.py``:

- :func:`softmax_module`: ``exp(x) / sum(exp(x))`` over the last dim, plain or
  safe (``exp(x - max(x)) / sum(exp(x - max(x)))``), as kernel ops;
- :func:`blocked_softmax_module`: the safe softmax as one customized kernel
  whose blocks own whole rows, optionally with its element-wise chain fused
  into a thread graph;
- :func:`attention_module`: ``softmax(Q·K)·V``, plain or safe.

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
