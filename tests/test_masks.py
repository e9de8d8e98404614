"""Masked attention: a 0/1 mask is a µGraph input multiplied after ``exp``.

``softmax(s + A)`` with an additive mask ``A`` of 0 and -inf is
``exp(s - m) * M / sum(exp(s - m) * M)`` with ``M = exp(A)``, 1 where ``A`` is
0 and 0 where it is -inf (causal masking: ``M`` lower triangular). That is
plain ring arithmetic on one more input, so the finite-field verifier is
exact on it; it draws ``M`` at random like any input, so what it proves
holds for every mask (and so for every 0/1 one), and a program that is right
only because ``M`` is 0/1 (``M * M = M``) is refuted, never wrongly accepted.
Checked: the interpreter against numpy's masked softmax, proofs of reordered
and max-shifted masked attention, refutations of a mask applied before
``exp`` or left out of the denominator, both backends through the default
lowering, and the search, which fuses masked attention into one kernel whose
block graph reads the mask (a lower-rank input, lifted) along the key loop.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_lowering import assert_emulation_matches
from test_triton import (
    _check_compiled,
    _compile_all_forms,
    _failures,
    _interpret,
    needs_triton,
)
from xdsl.dialects import func

from mirage_xdsl.dialects import kernel
from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.lowering.emulate import emulate
from mirage_xdsl.search import superoptimize
from mirage_xdsl.semantics.interpreter import run
from mirage_xdsl.verify.equivalence import equivalent

Q, K, V, M = (1, 2, 16, 32), (1, 2, 32, 128), (1, 2, 128, 32), (16, 128)


def attention(form: str = "plain"):
    """``softmax(q k) v`` with the 0/1 mask ``m`` applied as ``form`` says."""
    g = new_kernel_graph()
    q, k, v, m = (g.new_input(s) for s in (Q, K, V, M))
    s = g.matmul(q, k)
    if form == "safe":
        s = g.add(s, g.neg(g.reduce_max(s, 3)))
    if form == "before_exp":
        e = g.exp(g.mul(s, m))
    else:
        e = g.mul(m, g.exp(s)) if form == "reordered" else g.mul(g.exp(s), m)
    total = g.reduction(g.exp(s) if form == "unmasked_sum" else e, 3)
    if form == "reordered":
        g.mark_output(g.div(g.matmul(e, v), total))
    else:
        g.mark_output(g.matmul(g.div(e, total), v))
    return g.module()


def causal(rows: int, cols: int) -> np.ndarray:
    """The causal mask of the last ``rows`` queries over ``cols`` keys."""
    return np.tril(np.ones((rows, cols), np.float32), cols - rows)


def test_interpreter_matches_a_masked_softmax() -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype(np.float32) * 0.3 for s in (Q, K, V))
    m = causal(*M)
    (got,) = run(attention("safe"), [q, k, v, m])
    s = q @ k + np.where(m > 0, 0.0, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(got, p / p.sum(-1, keepdims=True) @ v, atol=1e-5)


def test_a_row_with_every_key_masked_is_zero_interpreted_and_as_cuda_c() -> None:
    """As torch's SDPA gives it: ``0 / 0`` in the softmax is 0, not NaN (a
    NaN there reaches every later position of a padded batch, through keys
    and values the mask multiplies by 0)."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype(np.float32) * 0.3 for s in (Q, K, V))
    m = causal(*M)
    m[3] = 0.0
    module = attention("safe")
    for got in (run(module, [q, k, v, m])[0], emulate(module, [q, k, v, m])[0]):
        assert not np.isnan(got).any()
        np.testing.assert_array_equal(got[..., 3, :], 0.0)
        np.testing.assert_allclose(
            np.delete(got, 3, axis=-2),
            np.delete(run(module, [q, k, v, causal(*M)])[0], 3, axis=-2),
            atol=2e-3,
        )


@pytest.mark.parametrize("form", ["reordered", "safe"])
def test_verifier_proves_masked_attention_rewritten(form: str) -> None:
    assert equivalent(attention("plain"), attention(form))


@pytest.mark.parametrize("form", ["before_exp", "unmasked_sum"])
def test_verifier_refutes_a_misplaced_mask(form: str) -> None:
    assert not equivalent(attention("plain"), attention(form))


def test_default_lowering_is_emulated_correctly() -> None:
    assert_emulation_matches(attention("safe"))


@needs_triton
def test_default_lowering_runs_under_tritons_interpreter(tmp_path) -> None:
    path = tmp_path / "masked_attention.mlir"
    path.write_text(module_text(attention("safe")))
    rows = _interpret("file", str(path))
    assert rows and not _failures(rows)


@needs_triton
def test_default_lowering_compiles_for_sm90() -> None:
    for compiled in _compile_all_forms(attention("safe")):
        _check_compiled(compiled)


@pytest.mark.slow
def test_search_fuses_masked_attention_into_one_kernel() -> None:
    program = attention("plain")
    out = superoptimize(program, budget=60.0, jobs=1, cache_dir="none", log=None)
    (fn,) = [op for op in out.ops if isinstance(op, func.FuncOp)]
    ops = [op for op in fn.body.block.ops if not isinstance(op, func.ReturnOp)]
    assert len(ops) == 1 and isinstance(ops[0], kernel.CustomizedOp)
    assert equivalent(program, out)
