"""Programs with layout ops (``transpose``, ``reshape``) for the lowering tests.

Shared by ``tests/test_layout_lowering.py`` (the CUDA C lowering, its
emulator and NVRTC; Triton's compiler) and ``tests/triton_interpret.py``
(Triton's interpreter). Each builder returns a verified module.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.ir.builder import new_kernel_graph, new_threadblock_graph


def heads() -> ModuleOp:
    """A projection split into heads: ``exp`` of ``[1, 64, 256]`` viewed as
    ``[1, 64, 4, 64]`` with the sequence and head dims swapped."""
    g = new_kernel_graph("heads")
    x, w = g.new_input((64, 128)), g.new_input((128, 256))
    y = g.reshape(g.reshape(g.matmul(x, w), (1, 64, 256)), (1, 64, 4, 64))
    g.mark_output(g.exp(g.transpose(y, 1, 2)))
    return g.module()


def keys_transposed() -> ModuleOp:
    """``q · kᵀ`` with the transpose of the last two dims as a kernel op."""
    g = new_kernel_graph("scores")
    q, k = g.new_input((2, 64, 32)), g.new_input((2, 64, 32))
    g.mark_output(g.matmul(q, g.transpose(k, 1, 2)))
    return g.module()


def returned_reshape() -> ModuleOp:
    """A chain of reshapes of an input feeds a kernel, and a reshape of that
    kernel's result is returned while another kernel reads the result: the
    kernel writes the output buffer, and the reduction reads it there."""
    g = new_kernel_graph("views")
    x = g.new_input((8, 64))
    e = g.exp(g.reshape(g.reshape(x, (8, 4, 16)), (2, 4, 64)))
    g.mark_output(g.reshape(e, (8, 64)))
    g.mark_output(g.reduction(e, 2))
    return g.module()


def padded_transpose() -> ModuleOp:
    """A transpose of the outer dims of a tensor of odd extents (padded to
    powers of two under Triton), then scaled."""
    g = new_kernel_graph("odd")
    x = g.new_input((3, 20, 12))
    g.mark_output(g.mul_scalar(g.transpose(x, 0, 2), 0.5))
    return g.module()


def transposed_in_kernel() -> ModuleOp:
    """``exp(q · kᵀ)`` in one customized kernel: each for-loop iteration's key
    tile is transposed in the block and multiplied, accumulating in fp32."""
    g = new_kernel_graph("attention_scores")
    q, k = g.new_input((64, 32)), g.new_input((128, 32))
    bg = new_threadblock_graph((2, 1, 1), (128, 1, 1), 2)
    tq = bg.new_input(q, (-1, -1, -1), 1)
    tk = bg.new_input(k, (0, -1, -1), 1)
    product = bg.matmul(tq, bg.transpose(tk, 0, 1))
    bg.new_output(bg.exp(bg.forloop_accum(product)), (1, -1, -1))
    (out,) = g.customized([q, k], bg)
    g.mark_output(out)
    return g.module()


PROGRAMS = {
    "heads": heads,
    "keys_transposed": keys_transposed,
    "returned_reshape": returned_reshape,
    "padded_transpose": padded_transpose,
    "transposed_in_kernel": transposed_in_kernel,
}


def reshaped_input() -> ModuleOp:
    """Returns a reshape of its input: nothing to compute, no kernel to write
    the output."""
    g = new_kernel_graph("view")
    x = g.new_input((8, 64))
    g.mark_output(g.reshape(x, (2, 4, 64)))
    return g.module()
