"""Log-softmax, the start of a cross-entropy, written with ``log``: the search
fuses it into one kernel, and torch code written with ``torch.log`` captures.
"""

from __future__ import annotations

import numpy as np
import pytest

import mirage_xdsl as mi
from mirage_xdsl.dialects import kernel
from mirage_xdsl.search import superoptimize
from mirage_xdsl.semantics.inputs import random_inputs
from mirage_xdsl.semantics.interpreter import run


def log_softmax_module(rows: int = 8, cols: int = 1024):
    """``x - log(sum(exp(x)))`` over the last dim, as plain kernel ops."""
    g = mi.new_kernel_graph("log_softmax")
    x = g.new_input(dims=(rows, cols), dtype=mi.float16)
    s = g.reduction(g.exp(x), 1)
    g.mark_output(g.add(x, g.neg(g.log(s))))
    return g.module()


def reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_search_fuses_log_softmax_into_one_kernel() -> None:
    module = log_softmax_module()
    xs = random_inputs(module, 0)
    found = superoptimize(module, budget=60, cache_dir="none")
    customized = [op for op in found.walk() if isinstance(op, kernel.CustomizedOp)]
    assert len(customized) == 1
    assert any(op.name == "thread.log" or op.name == "block.log" for op in found.walk())
    (got,) = run(found, xs)
    np.testing.assert_allclose(got, reference(xs[0]), rtol=1e-3, atol=1e-3)


def test_torch_log_softmax_written_with_log_captures() -> None:
    torch = pytest.importorskip("torch")
    from mirage_xdsl.torch.capture import capture

    def log_softmax(x):
        return x - torch.log(torch.exp(x).sum(-1, keepdim=True))

    x = torch.randn(4, 64, dtype=torch.float16)
    module = capture(log_softmax, [x])
    assert "kernel.log" in [op.name for op in module.walk()]
    (got,) = run(module, [x.numpy()])
    want = torch.log_softmax(x.float(), -1).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
