"""``kernel.broadcast``: a computed tensor stretched along its size-1 dims
(``torch.expand``; attention's ``repeat_kv``).

Checked on grouped-query attention's key repetition and a rank-lifting
broadcast: the shape rule, the interpreter against numpy, the verifier
(proves the repetition equal to reading a repeated input, refutes a
repetition along the wrong dim), both backends through the default lowering
(each stretched dim a grid dim whose blocks write copies of one tile) and
the search, which keeps the broadcast between segments.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from backend_checks import BackendChecks, parse_program

from mirage_xdsl.dialects import shapes
from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.search import superoptimize
from mirage_xdsl.semantics.interpreter import run
from mirage_xdsl.verify.equivalence import equivalent

PROGRAM = Path(__file__).parent / "filecheck" / "inputs" / "broadcast.mlir"


def scores(stretch: str):
    """``q @ k^T`` with each of 2 key heads serving 4 query heads."""
    g = new_kernel_graph()
    q, k = g.new_input((1, 8, 4, 16)), g.new_input((1, 2, 1, 64, 16))
    if stretch == "heads":
        k = g.reshape(g.broadcast(k, (1, 2, 4, 64, 16)), (1, 8, 64, 16))
    else:  # the wrong dim: each query head sees every key head in turn
        k = g.broadcast(g.reshape(k, (1, 1, 2, 64, 16)), (1, 4, 2, 64, 16))
        k = g.reshape(k, (1, 8, 64, 16))
    g.mark_output(g.matmul(q, g.transpose(k, 2, 3)))
    return g.module()


def module_of_file():
    return parse_program(PROGRAM)


def test_shape_rule_follows_numpy() -> None:
    assert shapes.expand((2, 1, 8), (2, 4, 8)) == (2, 4, 8)
    assert shapes.expand((8,), (3, 2, 8)) == (3, 2, 8)
    with pytest.raises(shapes.ShapeError, match="only size-1 dims stretch"):
        shapes.expand((2, 3, 8), (2, 6, 8))
    with pytest.raises(shapes.ShapeError, match="loses dims"):
        shapes.expand((2, 1, 8), (4, 8))


def test_interpreter_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 8, 4, 16)).astype(np.float32)
    k = rng.standard_normal((1, 2, 1, 64, 16)).astype(np.float32)
    (got,) = run(scores("heads"), [q, k])
    kk = np.repeat(k[:, :, 0], 4, axis=1)  # repeat_kv
    np.testing.assert_allclose(got, q @ kk.swapaxes(-1, -2), rtol=1e-5, atol=1e-5)


def test_verifier_refutes_stretching_the_wrong_dim() -> None:
    assert equivalent(scores("heads"), scores("heads"))
    assert not equivalent(scores("heads"), scores("groups"))


class TestBackends(BackendChecks):
    PROGRAMS = (PROGRAM,)


def test_search_keeps_the_broadcast_between_segments() -> None:
    program = module_of_file()
    out = superoptimize(program, budget=20.0, jobs=1, cache_dir="none", log=None)
    assert str(out).count("kernel.broadcast") == 2
    assert equivalent(program, out)


def test_builder_reads_past_a_broadcast_its_consumer_does_itself() -> None:
    """A broadcast feeding an element-wise op or a matmul that broadcasts the
    same way is never made: the op reads its operand, and the unread
    broadcast is dropped; one that is returned stays."""
    g = new_kernel_graph()
    x, y, w = g.new_input((4, 1, 8)), g.new_input((4, 3, 8)), g.new_input((8, 5))
    m = g.mul(g.broadcast(x, (4, 3, 8)), y)
    p = g.matmul(m, g.broadcast(w, (4, 8, 5)))
    g.mark_output(p)
    g.mark_output(g.broadcast(x, (4, 3, 8)))
    module = g.module()
    names = [op.name for op in module.walk() if op.name.startswith("kernel.")]
    assert names == ["kernel.mul", "kernel.matmul", "kernel.broadcast"]
    rng = np.random.default_rng(0)
    xs = [
        rng.standard_normal(s).astype(np.float32)
        for s in [(4, 1, 8), (4, 3, 8), (8, 5)]
    ]
    got_p, got_b = run(module, xs)
    np.testing.assert_allclose(got_p, (xs[0] * xs[1]) @ xs[2], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got_b, np.broadcast_to(xs[0], (4, 3, 8)))
