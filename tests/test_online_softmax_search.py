"""The search finds the online softmax: part maxima, shifted accumulations and
FlashDecoding's split over the keys, from attention as torch writes it.

A row maximum taken over a block's share of the keys (or one for-loop
iteration) is a *part maximum*: the rules let ``exp(s - m)`` and its sums
carry it, and only an accumulation weighted by it (``forloop_accum`` with a
``shift``) finishes them. In abstract expressions a part's maximum and the
row's are one term, so the shifted accumulation has the plain one's term and
the candidates pass pruning as subexpressions of the safe softmax.
"""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.search import labels as L
from mirage_xdsl.search import rules as R
from mirage_xdsl.search.block_layout import Layout, output_map
from mirage_xdsl.search.pruning.abstract_expr import (
    Expr,
    exprs_of_function,
    op_expr,
    output_exprs,
    var,
)
from mirage_xdsl.search.pruning.subexpr_oracle import SubexprOracle, equivalent
from mirage_xdsl.semantics.interpreter import entry_function

KEYS, ROWS, HEAD = L.axis(3), L.axis(1), L.axis(4)


def tile(labels, partial=(), phase=R.INVARIANT) -> R.Tensor:
    return R.Tensor((), tuple(labels), None, phase, frozenset(partial))


# --- abstract expressions ------------------------------------------------------


def test_shifted_accumulation_has_the_plain_term() -> None:
    """The weight exp(m - max m) is one in terms: a part's maximum and the
    row's are one term."""
    x, m = var("x"), var("m")
    attrs = {"reduction": "none", "forloop": 4}
    shifted = op_expr("forloop_accum", [x, m], [(8, 16), (8, 1)], attrs)
    assert shifted == op_expr("forloop_accum", [x], [(8, 16)], attrs)
    attrs = {"reduction": "sum", "forloop": 4}
    shifted = op_expr("forloop_accum", [x, m], [(8, 16), (8, 1)], attrs)
    assert str(shifted) == "sum(4, sum(16, x))"


def test_online_softmax_has_the_safe_attention_term() -> None:
    """The hand-written online softmax (a for-loop over the keys with shifted
    accumulations) has the term of the safe attention, not the plain one's,
    and every one of its tensors passes pruning against the safe target."""
    from softmax_program import attention_module, online_attention_module

    names = ["Q", "K", "V"]
    online = entry_function(online_attention_module(2, 16, 64, 16, 4, 2))
    safe = output_exprs(entry_function(attention_module(2, 16, 64, 16)), names)
    plain = output_exprs(
        entry_function(attention_module(2, 16, 64, 16, safe=False)), names
    )
    (got,) = output_exprs(online, names)
    assert equivalent(got, safe[0]) and not equivalent(got, plain[0])
    oracle = SubexprOracle(safe)
    for value, e in exprs_of_function(online, names).items():
        assert oracle.is_subexpr(e), (value, str(e))


def test_flashdecoding_parts_are_subexpressions_of_the_safe_softmax() -> None:
    """A block's part maximum, its shifted partial sums over a share of the
    keys, and the combine's shifted accumulation of them all pass."""
    (target,) = output_exprs(
        entry_function(_attention_program(2, 4, 16, 256)), ["Q", "K", "V"]
    )
    oracle = SubexprOracle([target])
    s = Expr.parse("mul(sum(16, mul(Q, K)), const_1_8)")
    m = op_expr("reduce_max", [s], [(4, 64)], {"dim": 1})
    e = op_expr(
        "exp", [op_expr("add", [s, Expr("neg", (m,))], [(4, 64), (4, 1)])], [(4, 64)]
    )
    pv = op_expr("matmul", [e, var("V")], [(4, 64), (64, 16)])
    rows = op_expr("reduce_sum", [e], [(4, 64)], {"dim": 1})
    accum = {"reduction": "none", "forloop": 4}
    num = op_expr("forloop_accum", [pv, m], [(4, 16), (4, 1)], accum)
    den = op_expr("forloop_accum", [rows, m], [(4, 1), (4, 1)], accum)
    out = op_expr("div", [num, den], [(4, 16), (4, 1)])
    for term in (m, e, pv, rows, num, den):
        assert oracle.is_subexpr(term), str(term)
    assert equivalent(out, target)


def test_no_maximum_is_added_to_a_plain_softmax() -> None:
    """Against exp(s) / sum(exp(s)) the part maxima and everything shifted by
    them are pruned: the search takes no maximum the program does not take."""
    (plain,) = output_exprs(
        entry_function(_plain_attention_program(2, 4, 16, 256)), ["Q", "K", "V"]
    )
    oracle = SubexprOracle([plain])
    s = Expr.parse("mul(sum(16, mul(Q, K)), const_1_8)")
    m = op_expr("reduce_max", [s], [(4, 64)], {"dim": 1})
    shifted = op_expr("add", [s, Expr("neg", (m,))], [(4, 64), (4, 1)])
    assert oracle.is_subexpr(s)
    assert not oracle.is_subexpr(m) and not oracle.is_subexpr(shifted)


# --- label rules ---------------------------------------------------------------


def test_a_maximum_over_split_keys_is_a_shift_that_only_its_accumulation_finishes():
    grid = R.Scope(grid=(KEYS,), reduced=frozenset({KEYS}), maxed=frozenset({KEYS}))
    scores = tile((ROWS, KEYS))
    m_labels, m_partial, _ = R.apply(grid, "reduce_max", [scores], {"dim": 1})
    assert m_partial == {L.shift(KEYS)}
    m = tile(m_labels, m_partial)
    exponent = R.apply(grid, "add", [scores, m], {})
    assert exponent is not None and exponent[1] == {L.shift(KEYS)}
    e = tile(exponent[0], exponent[1])
    assert R.apply(grid, "exp", [e], {})[1] == {L.shift(KEYS)}
    assert R.apply(grid, "sqrt", [e], {}) is None  # only exp factors a shift out
    pv = R.apply(grid, "matmul", [e, tile((KEYS, HEAD))], {})
    assert pv[1] == {KEYS, L.shift(KEYS)}
    # a maximum is taken only along an axis the program takes it over
    assert (
        R.apply(R.Scope(maxed=frozenset()), "reduce_max", [scores], {"dim": 1}) is None
    )

    loop = R.Scope(loop=KEYS, reduced=frozenset({KEYS}), maxed=frozenset({KEYS}))
    x = tile((ROWS, HEAD), {KEYS, L.shift(KEYS)}, R.LOOP)
    shift = tile((ROWS, L.UNIT), {L.shift(KEYS)}, R.LOOP)
    none = {"reduction": "none"}
    assert R.apply(loop, "forloop_accum", [x], none) is None
    assert R.apply(loop, "forloop_accum", [x, shift], none)[1] == frozenset()
    assert R.apply(loop, "forloop_accum", [x, shift], {"reduction": "mean"}) is None
    other = tile((ROWS, L.UNIT), {L.shift(HEAD)}, R.LOOP)
    assert R.apply(loop, "forloop_accum", [x, other], none) is None
    shared = R.Scope(
        grid=(KEYS,), loop=KEYS, reduced=frozenset({KEYS}), maxed=frozenset({KEYS})
    )
    assert R.apply(shared, "reduce_max", [tile((ROWS, KEYS))], {"dim": 1}) is None


def test_part_maxima_and_their_sums_are_written_side_by_side() -> None:
    layout = Layout((0, 1, 2), (L.axis(0), KEYS), None)
    g = L.axis(0)
    m = tile((g, ROWS, L.UNIT), {L.shift(KEYS)})
    omap, record = output_map(layout, m)
    part = L.part_token(KEYS)
    assert omap == (0, 2, -1) and record.labels[2] == L.split(KEYS, L.UNIT)
    assert record.partial == {L.shift(part)}
    total = tile((g, ROWS, HEAD), {KEYS, L.shift(KEYS)})
    omap, record = output_map(layout, total)
    assert record.partial == {part, L.shift(part)}
    # exp(s - m) itself still spans the keys: each block's piece is relative
    # to its own maximum, so it is not saved
    assert output_map(layout, tile((g, ROWS, KEYS), {L.shift(KEYS)})) is None


# --- the search ----------------------------------------------------------------


def _attention_program(groups: int, rows: int, head: int, keys: int) -> ModuleOp:
    """Safe-softmax attention as torch's capture writes it, on stacked rows."""
    from mirage_xdsl.ir.builder import new_kernel_graph

    g = new_kernel_graph("attention")
    q = g.new_input((1, groups, rows, head))
    k = g.new_input((1, groups, head, keys))
    v = g.new_input((1, groups, keys, head))
    s = g.mul_scalar(g.matmul(q, k), 0.125)
    e = g.exp(g.add(s, g.neg(g.reduce_max(s, 3))))
    g.mark_output(g.matmul(g.div(e, g.reduction(e, 3)), v))
    return g.module()


def _plain_attention_program(groups: int, rows: int, head: int, keys: int) -> ModuleOp:
    """The same with the plain softmax, exp(s) / sum(exp(s))."""
    from mirage_xdsl.ir.builder import new_kernel_graph

    g = new_kernel_graph("plain_attention")
    q = g.new_input((1, groups, rows, head))
    k = g.new_input((1, groups, head, keys))
    v = g.new_input((1, groups, keys, head))
    e = g.exp(g.mul_scalar(g.matmul(q, k), 0.125))
    g.mark_output(g.matmul(g.div(e, g.reduction(e, 3)), v))
    return g.module()


def _captured_sdpa(heads: int, kv_heads: int, head: int, keys: int) -> ModuleOp:
    import torch
    import torch.nn.functional as F

    from mirage_xdsl.torch.capture import capture

    def decode(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    q = torch.randn(1, heads, 1, head, dtype=torch.float16)
    k = torch.randn(1, kv_heads, keys, head, dtype=torch.float16)
    v = torch.randn(1, kv_heads, keys, head, dtype=torch.float16)
    return capture(decode, [q, k, v])


def _flashdecoding(found: ModuleOp, keys: int) -> None:
    """Check that a found program is a kernel whose grid splits the keys and
    takes each block's part maximum, then a combine that adds the parts up
    weighted by those maxima."""
    customized = [op for op in found.walk() if isinstance(op, kernel.CustomizedOp)]
    assert len(customized) == 2, found
    split, combine = customized
    reads = [
        i
        for i in split.walk()
        if isinstance(i, block.InputOp) and keys in _shape(i.source)
    ]
    assert reads and all(
        any(d >= 0 and _shape(i.source)[d] == keys for d in i.input_map) for i in reads
    ), f"the grid does not split the keys:\n{found}"
    assert any(isinstance(op, block.ReduceMaxOp) for op in split.walk())
    accums = [op for op in combine.walk() if isinstance(op, block.ForloopAccumOp)]
    assert accums and all(a.shift is not None for a in accums)


def _shape(value) -> tuple[int, ...]:
    return tuple(value.type.get_shape())


def _search(module: ModuleOp, keys: int, budget: float) -> ModuleOp:
    from mirage_xdsl.search import superoptimize

    found = superoptimize(
        module, jobs=1, cache_dir="none", budget=budget, max_kernels=2, log=None
    )
    found.verify()
    _flashdecoding(found, keys)
    return found


def _mirage_verify(module: ModuleOp, found: ModuleOp, tmp_path, capsys) -> None:
    from mirage_xdsl.cli.verify import main as mirage_verify

    first, second = tmp_path / "captured.mlir", tmp_path / "found.mlir"
    first.write_text(str(module))
    second.write_text(str(found))
    assert mirage_verify([str(first), str(second)]) == 0
    assert "verdict: equivalent" in capsys.readouterr().out


@pytest.fixture(scope="module")
def decode_search() -> tuple[ModuleOp, ModuleOp]:
    """GQA decode captured from F.scaled_dot_product_attention (8 query heads
    over 2 key heads, 4096 cached keys, head dim 16), and the search's pick
    (the cost model ranks: no GPU here). The search does not finish its
    second kernel depth in any budget a test can give; it reaches
    FlashDecoding's combine first (a loop over the parts of a prefix's
    outputs comes first), about 10 s in on an idle two-core machine."""
    module = _captured_sdpa(8, 2, 16, 4096)
    return module, _search(module, 4096, budget=40.0)


@pytest.mark.slow
def test_captured_decode_attention_splits_the_keys_over_blocks(
    decode_search, tmp_path, capsys
):
    """The pick is FlashDecoding with the online softmax (checked in
    ``_search``), and mirage-verify proves it equal to the captured program."""
    module, found = decode_search
    _mirage_verify(module, found, tmp_path, capsys)


@pytest.mark.slow
def test_flashdecoding_pick_compiles_and_runs_in_tritons_interpreter(
    decode_search, tmp_path
):
    """Both backends take the pick: its CUDA C compiles to sm_90 (where NVRTC
    is installed), and its Triton kernels, run by Triton's CPU interpreter,
    agree with the captured program."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from mirage_xdsl.lowering import nvrtc
    from mirage_xdsl.lowering.cuda import generate_program

    _, found = decode_search
    if nvrtc.available():
        assert nvrtc.compile_cuda(generate_program(found).source).cubin
    pytest.importorskip("triton")
    path = tmp_path / "found.mlir"
    path.write_text(str(found))
    script = Path(__file__).parent / "triton_interpret.py"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run(
        [sys.executable, str(script), "file", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    lines = [json.loads(line) for line in run.stdout.splitlines() if line]
    assert lines, run.stderr[-2000:]
    for line in lines:
        assert "error" not in line, line
        assert max(line["errors"]) < 1e-2, line


@pytest.mark.slow
def test_captured_decode_attention_at_full_shape(tmp_path, capsys):
    """The same at Llama-style decode shape: 32 query heads of 64 over 8 key
    heads, 4096 cached keys, fp16."""
    module = _captured_sdpa(32, 8, 64, 4096)
    found = _search(module, 4096, budget=120.0)
    _mirage_verify(module, found, tmp_path, capsys)


@pytest.mark.slow
def test_bench_tool_reports_the_split_and_the_shifted_combine(decode_search):
    """tools/bench_decode_attention.py says what the pick does: two
    customized kernels, the first taking part maxima, the second adding the
    parts up weighted by them."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
    from bench_decode_attention import shape_of

    _, found = decode_search
    split, combine = shape_of(found)["customized"]
    assert split["reduce_max"] and not split["shifted_accums"]
    assert combine["shifted_accums"] == 2 and combine["forloop"] > 1
