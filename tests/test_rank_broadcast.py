"""Numpy broadcasting at the kernel level: a norm weight ``[h]`` times
``[b, t, h]``, and a batched input times one 2-d weight, ``[b, t, k] x [k, n]``.

Every layer is checked on the same few programs: the builder and the dialect
verifiers, the interpreter against numpy, the finite-field verifier (proves a
reordering, refutes a wrong program), the default lowering through both
backends (Triton under its CPU interpreter and compiled for sm_90, the CUDA C
path under the SIMT emulator and NVRTC), and hand-written block graphs whose
``block.input`` lifts a lower-rank tensor and whose matmul broadcasts a batch
of one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from backend_checks import BackendChecks, parse_program
from xdsl.dialects import func

from mirage_xdsl.dialects import block, kernel, shapes
from mirage_xdsl.ir.builder import new_kernel_graph, new_threadblock_graph
from mirage_xdsl.search import labels as L
from mirage_xdsl.search import superoptimize
from mirage_xdsl.semantics.interpreter import entry_function, run
from mirage_xdsl.verify.equivalence import equivalent

INPUTS = Path(__file__).parent / "filecheck" / "inputs"
FILES = ["rank_broadcast", "batch_broadcast_rhs", "batch_broadcast_lhs"]


def norm_linear(order: str = "xw"):
    """``(rms_norm(x) * w) @ p`` with ``w: [64]`` and ``p: [64, 32]``."""
    g = new_kernel_graph()
    x, w, p = g.new_input((2, 16, 64)), g.new_input((64,)), g.new_input((64, 32))
    n = g.rms_norm(x)
    scaled = {"xw": lambda: g.mul(n, w), "wx": lambda: g.mul(w, n)}[order]()
    g.mark_output(g.matmul(scaled, p))
    return g.module()


def module_of(name: str):
    return parse_program(INPUTS / f"{name}.mlir")


def test_shape_rules_follow_numpy() -> None:
    assert shapes.broadcast((2, 16, 64), (64,)) == (2, 16, 64)
    assert shapes.broadcast((64,), (4, 1, 1)) == (4, 1, 64)
    assert shapes.matmul((2, 16, 64), (64, 32)) == (2, 16, 32)
    assert shapes.matmul((16, 64), (3, 64, 8)) == (3, 16, 8)
    assert shapes.matmul((2, 1, 4, 8), (3, 8, 5)) == (2, 3, 4, 5)
    with pytest.raises(shapes.ShapeError, match="dimension 2 does not broadcast"):
        shapes.broadcast((2, 16, 64), (32,))
    with pytest.raises(shapes.ShapeError, match="batch dims differ"):
        shapes.matmul((2, 16, 64), (3, 64, 8))


def test_builder_broadcasts_a_weight_and_shares_a_2d_matmul_weight() -> None:
    g = new_kernel_graph()
    x, w, p = g.new_input((2, 16, 512)), g.new_input((512,)), g.new_input((512, 1024))
    y = g.matmul(g.mul(x, w), p)
    assert y.type.get_shape() == (2, 16, 1024)
    with pytest.raises(shapes.ShapeError, match="does not broadcast"):
        g.add(x, g.new_input((16,)))


def test_interpreter_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    x, w, p = (
        rng.standard_normal(s).astype(np.float32)
        for s in [(2, 16, 64), (64,), (64, 32)]
    )
    (got,) = run(norm_linear(), [x, w, p])
    want = x / np.sqrt((x * x).mean(-1, keepdims=True)) * w @ p
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_verifier_proves_the_commuted_product_and_refutes_a_sum() -> None:
    assert equivalent(norm_linear("xw"), norm_linear("wx"))
    g = new_kernel_graph()
    x, w, p = g.new_input((2, 16, 64)), g.new_input((64,)), g.new_input((64, 32))
    g.mark_output(g.matmul(g.add(g.rms_norm(x), w), p))
    assert not equivalent(norm_linear(), g.module())


def test_block_input_lifts_a_lower_rank_tensor() -> None:
    g = new_kernel_graph()
    x, w, p = g.new_input((2, 16, 64)), g.new_input((64,)), g.new_input((64, 32))
    bg = new_threadblock_graph((2, 2, 1), (128, 1, 1), 4)
    tx = bg.new_input(x, (0, -1, -1), 2)
    tw = bg.new_input(w, (-1, -1, -1), 2, rank=3)
    tp = bg.new_input(p, (-1, 2, -1), 1, rank=3)
    assert tw.type.get_shape() == (1, 1, 16) and tp.type.get_shape() == (1, 16, 16)
    bg.new_output(bg.forloop_accum(bg.matmul(bg.mul(tx, tw), tp)), (0, 2, -1))
    (out,) = g.customized([x, w, p], bg)
    g.mark_output(out)
    fused = g.module()
    plain = new_kernel_graph()
    x, w, p = (plain.new_input(s) for s in [(2, 16, 64), (64,), (64, 32)])
    plain.mark_output(plain.matmul(plain.mul(x, w), p))
    assert equivalent(fused, plain.module())


class TestBackends(BackendChecks):
    PROGRAMS = tuple(INPUTS / f"{name}.mlir" for name in FILES)


def test_labels_line_up_trailing_dims() -> None:
    a, b, c = L.axis(0), L.axis(1), L.axis(2)
    assert L.broadcast((a, b, c), (c,)) == (a, b, c)
    assert L.broadcast((c,), (a, b)) is None
    assert L.matmul((a, b, c), (c, L.axis(3))) == (a, b, L.axis(3))
    assert L.matmul((L.UNIT, b, c), (a, c, L.axis(3))) == (a, b, L.axis(3))
    function = entry_function(norm_linear())
    axes = L.analyse(function)
    x, w, p = function.body.block.args
    assert axes.labels[w] == axes.labels[x][-1:] == axes.labels[p][:1]


def test_search_fuses_the_norm_weight_and_the_shared_weight() -> None:
    """RMSNorm, times a weight ``[h]``, times a 2-d weight: one kernel whose
    block graph lifts both weights, verified equal to the input."""
    program = norm_linear()
    out = superoptimize(program, budget=60.0, jobs=1, cache_dir="none", log=None)
    (fn,) = [op for op in out.ops if isinstance(op, func.FuncOp)]
    kernels = [op for op in fn.body.block.ops if isinstance(op, kernel.CustomizedOp)]
    assert len(kernels) == 1
    loads = [op for op in kernels[0].entry.ops if isinstance(op, block.InputOp)]
    lifted = [op for op in loads if len(op.viewed_shape) > len(op.source.type.shape)]
    assert len(lifted) == 2
    assert equivalent(program, out)
