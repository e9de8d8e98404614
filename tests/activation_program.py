"""A small program that uses every activation op at every level.

Shared by the lowering tests of both backends (``tests/test_lowering.py``,
``tests/test_triton.py``, ``tests/test_cuda_compile.py``) and by
``tests/triton_interpret.py``: kernel-level ops (lowered through
default customization), block-level ops after a block matmul, and, with
``fused``, the same block ops as one thread graph.
"""

from __future__ import annotations

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

ACTIVATIONS = ("neg", "relu", "sigmoid", "tanh", "gelu", "gelu_erf")


def _mix(g: KernelGraph | BlockGraph, x: SSAValue) -> SSAValue:
    """(tanh(gelu(x) + gelu_erf(-x))) * sigmoid(relu(x)): each op once."""
    h = g.add(g.gelu(x), g.gelu_erf(g.neg(x)))
    return g.mul(g.tanh(h), g.sigmoid(g.relu(x)))


def activation_module(fused: bool = False) -> ModuleOp:
    g = new_kernel_graph("activations")
    x = g.new_input((16, 64))
    w = g.new_input((64, 32))
    g.mark_output(_mix(g, x))
    bg = new_threadblock_graph((2, 1, 1), (128, 1, 1), 1)
    bx = bg.new_input(x, (0, -1, -1), -1)
    bw = bg.new_input(w, (-1, -1, -1), -1)
    bg.new_output(_mix(bg, bg.matmul(bx, bw)), (0, -1, -1))
    (out,) = g.customized([x, w], bg)
    g.mark_output(out)
    return finished(g, fused)


def finished(g: KernelGraph, fused: bool) -> ModuleOp:
    """``g``'s verified module, its block ops fused into thread graphs when
    ``fused`` (the form the lowering sees after ``fuse-thread-graphs``)."""
    module = g.module()
    if fused:
        FuseThreadGraphsPass().apply(make_context(), module)
    module.verify()
    return module
