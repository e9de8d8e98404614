"""One small program per element-wise op of the op table, at every level.

Shared by ``tests/test_op_table.py`` and ``tests/triton_interpret.py``: the op
on a kernel-level tensor (lowered through default customization), the op on a
block-level tile after a block matmul, and, with ``fused``, the block op inside
a thread graph. Unary ops take one operand, ops with a constant take 0.5,
binary ops take the tensor and a broadcast row.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from mirage_xdsl.ir.builder import (
    BlockGraph,
    KernelGraph,
    new_kernel_graph,
    new_threadblock_graph,
)
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.lowering.fuse_thread_graphs import FuseThreadGraphsPass
from mirage_xdsl.ops import OPS, Form, elementwise_kinds
from mirage_xdsl.semantics.inputs import random_inputs

KINDS = elementwise_kinds()
"""Every element-wise kind of the op table, in table order."""
CONSTANT = 0.5


def apply(g: KernelGraph | BlockGraph, kind: str, x: SSAValue, row: SSAValue):
    """``kind`` on ``x`` through the builder method the table gives it."""
    form = OPS[kind].form
    method = getattr(g, kind)
    if form is Form.SCALAR:
        return method(x, CONSTANT)
    if form is Form.BINARY:
        return method(x, row)
    return method(x)


def op_module(kind: str, fused: bool = False) -> ModuleOp:
    """``kind`` at the kernel level, and at the block level after a matmul
    (in a thread graph when ``fused``); two outputs."""
    g = new_kernel_graph(f"op_{kind}")
    x = g.new_input((16, 64))
    row = g.new_input((1, 64))
    w = g.new_input((64, 32))
    row_w = g.new_input((1, 32))
    g.mark_output(apply(g, kind, x, row))
    bg = new_threadblock_graph((2, 1, 1), (128, 1, 1), 1)
    bx = bg.new_input(x, (0, -1, -1), -1)
    bw = bg.new_input(w, (-1, -1, -1), -1)
    br = bg.new_input(row_w, (-1, -1, -1), -1)
    bg.new_output(apply(bg, kind, bg.matmul(bx, bw), br), (0, -1, -1))
    (out,) = g.customized([x, w, row_w], bg)
    g.mark_output(out)
    module = g.module()
    if fused:
        FuseThreadGraphsPass().apply(make_context(), module)
    module.verify()
    return module


def op_inputs(module: ModuleOp, seed: int = 0) -> list[np.ndarray]:
    """fp16 inputs in the domain of every op (the square root's, the
    logarithm's): in [0.5, 1], the matmul's weight divided by its 64 rows so
    the block-level operand stays in [0.25, 1] as well."""
    x, row, w, row_w = random_inputs(module, seed, 0.5, 1.0)
    return [x, row, (w / np.float16(64)).astype(np.float16), row_w]
