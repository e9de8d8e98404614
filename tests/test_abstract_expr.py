"""Abstract expressions: the op table, the axioms, and pruning verdicts."""

from __future__ import annotations

import pytest

from mirage_xdsl.search.pruning.abstract_expr import (
    Expr,
    exprs_of_function,
    op_expr,
    output_exprs,
    var,
)
from mirage_xdsl.search.pruning.axioms import Z3Axioms
from mirage_xdsl.search.pruning.normal_form import normal_form, to_expr
from mirage_xdsl.search.pruning.subexpr_oracle import SubexprOracle, equivalent
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS

P = Expr.parse

INPUT_NAMES = {
    "gqa": ["Q", "K", "V"],
    "qknorm_gqa": ["Q", "K", "V"],
    "rmsnorm_linear": ["X", "W"],
    "lora": ["X", "W", "A", "B"],
    "gated_mlp": ["X", "A", "B"],
    "norm_transformer": ["X", "H", "alpha"],
}


def targets(workload: str, batch: int = 1, scale: int = 1) -> list[Expr]:
    fn = entry_function(WORKLOADS[workload].module(batch, scale))
    return output_exprs(fn, INPUT_NAMES[workload])


@pytest.fixture(scope="module")
def z3_axioms() -> Z3Axioms:
    return Z3Axioms(timeout_ms=5000)


# --- the axioms ---------------------------------------------------------------

EQUIVALENCE_AXIOMS = [
    ("add(x, y)", "add(y, x)"),
    ("mul(x, y)", "mul(y, x)"),
    ("add(x, add(y, z))", "add(add(x, y), z)"),
    ("mul(x, mul(y, z))", "mul(mul(x, y), z)"),
    ("add(mul(x, z), mul(y, z))", "mul(add(x, y), z)"),
    ("add(div(x, z), div(y, z))", "div(add(x, y), z)"),
    ("mul(x, div(y, z))", "div(mul(x, y), z)"),
    ("div(div(x, y), z)", "div(x, mul(y, z))"),
    ("x", "sum(1, x)"),
    ("sum(6, sum(4, x))", "sum(24, x)"),
    ("sum(8, add(x, y))", "add(sum(8, x), sum(8, y))"),
    ("sum(8, mul(x, y))", "mul(sum(8, x), y)"),
    ("sum(8, div(x, y))", "div(sum(8, x), y)"),
]

SUBEXPR_AXIOMS = [
    ("x", "add(x, y)"),
    ("x", "mul(x, y)"),
    ("x", "div(x, y)"),
    ("y", "div(x, y)"),
    ("x", "exp(x)"),
    ("x", "sum(12, x)"),
    ("x", "x"),
    ("x", "sqrt(x)"),
    ("x", "silu(x)"),
    ("x", "exp(add(silu(x), y))"),  # transitivity
    ("x", "relu(x)"),
    ("x", "neg(x)"),
    ("mul(x, y)", "gelu(add(sum(4, mul(x, y)), z))"),
    ("x", "tanh(sigmoid(gelu_erf(x)))"),
]


@pytest.mark.parametrize("lhs,rhs", EQUIVALENCE_AXIOMS)
def test_equivalence_axiom(lhs: str, rhs: str, z3_axioms: Z3Axioms):
    a, b = P(lhs), P(rhs)
    assert equivalent(a, b)
    assert z3_axioms.prove_equal(a, b) is True


@pytest.mark.parametrize("small,big", SUBEXPR_AXIOMS)
def test_subexpr_axiom(small: str, big: str):
    oracle = SubexprOracle([P(big)], use_fallback=False)
    assert oracle.fast_is_subexpr(P(small)) is True
    assert oracle.z3_is_subexpr(P(small)) is True


@pytest.mark.parametrize(
    "a,b",
    [
        ("add(x, x)", "sum(2, x)"),
        ("div(x, div(y, z))", "div(mul(x, z), y)"),
        ("sum(2, add(x, y))", "add(sum(2, x), y)"),
        ("exp(add(x, y))", "mul(exp(x), exp(y))"),
        ("div(x, sum(4, y))", "sum(4, div(x, y))"),
        ("relu(x)", "gelu(x)"),  # different heads never meet
        ("neg(neg(x))", "x"),  # neg is uninterpreted: nothing cancels
        ("add(relu(x), neg(relu(neg(x))))", "x"),
    ],
)
def test_not_equivalent(a: str, b: str):
    assert not equivalent(P(a), P(b))


def test_terms_are_hash_consed():
    """Equal terms built apart are one object, also after pickling (search
    workers receive them), and differing ones are not."""
    import pickle

    a = P("div(exp(x), sum(4, exp(x)))")
    assert a is P("div(exp(x), sum(4, exp(x)))")
    assert pickle.loads(pickle.dumps(a)) is a
    assert a is not P("div(exp(x), sum(8, exp(x)))")


def test_normal_form_round_trips():
    for e in ["div(sum(4, mul(add(x, y), z)), sqrt(sum(2, mul(x, x))))", "exp(x)"]:
        assert normal_form(to_expr(normal_form(P(e)))) == normal_form(P(e))


# --- the op table ---------------------------------------------------------------


def test_matmul_reduce_rmsnorm():
    x, w = var("X"), var("W")
    assert str(op_expr("matmul", [x, w], [(8, 64), (64, 32)], {})) == (
        "sum(64, mul(X, W))"
    )
    assert str(op_expr("reduce_sum", [x], [(8, 64)], {"dim": 0})) == "sum(8, X)"
    assert str(op_expr("rms_norm", [x], [(8, 64)], {})) == (
        "div(X, sqrt(sum(64, mul(X, X))))"
    )
    assert str(op_expr("square", [x], [(8, 64)], {})) == "mul(X, X)"


def test_forloop_accum_multiplies_counts():
    q, k = var("Q"), var("K")
    tile = op_expr("matmul", [q, k], [(64, 16), (16, 64)], {})
    acc = op_expr(
        "forloop_accum", [tile], [(64, 64)], {"reduction": "none", "forloop": 4}
    )
    assert str(acc) == "sum(4, sum(16, mul(Q, K)))"
    whole = op_expr("matmul", [q, k], [(64, 64), (64, 64)], {})
    assert equivalent(acc, whole)
    rms = op_expr("forloop_accum", [q], [(8, 16)], {"reduction": "rms", "forloop": 4})
    assert equivalent(rms, P("sqrt(sum(64, mul(Q, Q)))"))
    inv = {"reduction": "mean", "forloop": 4, "loop_invariant": True}
    assert equivalent(op_expr("forloop_accum", [q], [(8, 16)], inv), P("sum(16, Q)"))


def test_lora_concatenation_trick():
    x, w, a, b = map(var, "XWAB")
    xa = op_expr("matmul", [x, a], [(1, 256), (256, 16)], {})
    lhs = op_expr("concat", [x, xa], [(1, 256), (1, 16)], {"dim": 1})
    rhs = op_expr("concat", [w, b], [(256, 4096), (16, 4096)], {"dim": 0})
    out = op_expr("matmul", [lhs, rhs], [(1, 272), (272, 4096)], {})
    (target,) = targets("lora")
    assert out == target
    assert str(target) == (
        "add(sum(256, mul(X, W)), sum(16, mul(sum(256, mul(X, A)), B)))"
    )
    oracle = SubexprOracle([target])
    assert oracle.is_subexpr(lhs) and oracle.is_subexpr(rhs)
    wrong = op_expr(
        "concat", [x, op_expr("exp", [x], [(1, 256)], {})], [(1, 256)] * 2, {"dim": 1}
    )
    assert not oracle.is_subexpr(wrong)


def test_concat_pieces_follow_elementwise_ops():
    x, y, z = map(var, "xyz")
    c = op_expr("concat", [x, y], [(4, 8), (4, 8)], {"dim": 1})
    d = op_expr("concat", [z, y], [(4, 12), (4, 4)], {"dim": 1})
    s = op_expr("add", [c, d], [(4, 16), (4, 16)], {})
    assert str(s) == "concat[-1](8: add(x, z), 4: add(y, z), 4: add(y, y))"
    total = op_expr("reduce_sum", [s], [(4, 16)], {"dim": 1})
    assert equivalent(
        total, P("add(add(sum(8, add(x, z)), sum(4, add(y, z))), sum(4, add(y, y)))")
    )


# --- workloads and hand-written µGraphs ---------------------------------------------


SHIFTED = ("gqa_online_softmax",)
"""Hand-written µGraphs with shifted accumulations (the online softmax): their
terms are the *safe* softmax's (``exp(s - max s)`` stays its own term), so
they differ from the plain workload's (the verifier proves them equal,
``tests/test_verify.py``); ``tests/test_online_softmax_search.py`` checks
them against the safe attention."""


@pytest.mark.parametrize("name", SHIFTED)
def test_shifted_handwritten_is_not_the_workload_term(name: str):
    """The online softmax's term keeps the maxima: not the plain term, which
    pruning by abstract expression would need to treat it as the workload."""
    workload, build = HANDWRITTEN[name]
    (got,) = output_exprs(entry_function(build(1, 1)), INPUT_NAMES[workload])
    (want,) = targets(workload)
    assert "max(" in str(got) and not equivalent(got, want)


def test_workload_targets():
    assert [str(t) for t in targets("gqa")] == [
        "sum(4096, mul(div(exp(sum(64, mul(Q, K))), "
        "sum(4096, exp(sum(64, mul(Q, K))))), V))"
    ]
    assert [str(t) for t in targets("gated_mlp")] == [
        "mul(silu(sum(4096, mul(X, A))), sum(4096, mul(X, B)))"
    ]
    assert [str(t) for t in targets("rmsnorm_linear")] == [
        "sum(4096, mul(div(X, sqrt(sum(4096, mul(X, X)))), W))"
    ]
    assert len(targets("norm_transformer")) == 2


@pytest.mark.parametrize("name", sorted(set(HANDWRITTEN) - set(SHIFTED)))
def test_handwritten_matches_workload(name: str):
    workload, build = HANDWRITTEN[name]
    fn = entry_function(build(1, 1))
    outs = output_exprs(fn, INPUT_NAMES[workload])
    expected = targets(workload)
    assert len(outs) == len(expected)
    for got, want in zip(outs, expected, strict=True):
        assert equivalent(got, want), (str(got), str(want))
    oracle = SubexprOracle(expected)
    for value, e in exprs_of_function(fn, INPUT_NAMES[workload]).items():
        assert oracle.is_subexpr(e), (value, str(e))


# --- pruning verdicts ------------------------------------------------------------

ACCEPTED = {
    "gqa": [
        "sum(64, mul(Q, K))",
        "exp(sum(64, mul(Q, K)))",
        "sum(4096, exp(sum(64, mul(K, Q))))",
        "sum(256, exp(sum(64, mul(Q, K))))",
        "sum(1024, mul(exp(sum(64, mul(Q, K))), V))",
        "div(sum(4096, mul(exp(sum(64, mul(Q, K))), V)), "
        "sum(4096, exp(sum(64, mul(Q, K)))))",
        "div(exp(sum(64, mul(Q, K))), sum(4096, exp(sum(64, mul(Q, K)))))",
        "mul(exp(sum(64, mul(Q, K))), V)",
    ],
    "rmsnorm_linear": [
        "mul(X, X)",
        "sum(4096, mul(X, X))",
        "sum(64, mul(X, X))",
        "sqrt(sum(4096, mul(X, X)))",
        "sum(64, mul(X, W))",
        "div(sum(4096, mul(X, W)), sqrt(sum(4096, mul(X, X))))",
        "div(X, sqrt(sum(4096, mul(X, X))))",
    ],
    "lora": [
        "sum(256, mul(X, A))",
        "sum(16, mul(sum(16, mul(X, A)), B))",
        "sum(256, mul(X, W))",
        "mul(X, W)",
        "add(W, sum(16, mul(A, B)))",
    ],
    "gated_mlp": [
        "sum(4096, mul(X, A))",
        "silu(sum(4096, mul(X, A)))",
        "sum(512, mul(X, B))",
    ],
    "norm_transformer": [
        "add(X, mul(alpha, X))",
        "mul(add(X, mul(alpha, X)), add(X, mul(alpha, X)))",
        "sqrt(sum(4096, mul(H, H)))",
    ],
}

REJECTED = {
    "gqa": [
        "exp(V)",
        "sum(64, mul(Q, V))",
        "exp(Q)",
        "sum(4096, mul(Q, K))",
        "sum(3, exp(sum(64, mul(Q, K))))",
        "div(mul(exp(sum(64, mul(Q, K))), V), exp(sum(64, mul(Q, K))))",
        "exp(sum(4096, mul(exp(sum(64, mul(Q, K))), V)))",
        "add(Q, K)",
    ],
    "rmsnorm_linear": [
        "sqrt(X)",
        "sum(4096, mul(X, sqrt(sum(4096, mul(X, X)))))",
        "exp(X)",
    ],
    "lora": ["mul(A, W)", "mul(W, B)", "sum(512, mul(X, W))", "add(X, W)"],
    "gated_mlp": ["silu(sum(4096, mul(X, B)))", "mul(A, B)", "silu(X)"],
    "norm_transformer": [
        "mul(alpha, H)",
        "add(H, alpha)",
        "sqrt(sum(4096, mul(X, X)))",
    ],
}


@pytest.mark.parametrize(
    "workload,text", [(w, t) for w, ts in ACCEPTED.items() for t in ts]
)
def test_correct_prefix_accepted(workload: str, text: str):
    oracle = SubexprOracle(targets(workload), use_fallback=False)
    assert oracle.fast_is_subexpr(P(text)) is True


@pytest.mark.parametrize(
    "workload,text", [(w, t) for w, ts in REJECTED.items() for t in ts]
)
def test_wrong_prefix_rejected(workload: str, text: str):
    oracle = SubexprOracle(targets(workload), use_fallback=False)
    assert oracle.fast_is_subexpr(P(text)) is False
    assert oracle.is_subexpr(P(text)) is False


def test_oracle_caches_by_normal_form():
    oracle = SubexprOracle(targets("gqa"), use_fallback=False)
    assert oracle.is_subexpr(P("exp(sum(64, mul(Q, K)))"))
    assert oracle.is_subexpr(P("exp(sum(4, sum(16, mul(K, Q))))"))
    assert oracle.stats.queries == 2 and oracle.stats.cache_hits == 1


def test_undecided_queries_are_kept(monkeypatch):
    oracle = SubexprOracle(targets("gqa"), use_fallback=False)
    monkeypatch.setattr(oracle, "fast_is_subexpr", lambda e: None)
    assert oracle.is_subexpr(P("exp(V)"))
    assert oracle.stats.undecided == 1


def test_one_kernel_lora_with_block_concat():
    """concat(X, X·A)·concat(W, B) in one customized kernel equals the target."""
    import numpy as np

    from mirage_xdsl.ir.builder import new_kernel_graph, new_threadblock_graph
    from mirage_xdsl.semantics.interpreter import run
    from mirage_xdsl.workloads import random_inputs, ref_lora

    g = new_kernel_graph("lora")
    x, w = g.new_input((1, 16)), g.new_input((16, 256))
    a, b = g.new_input((16, 16)), g.new_input((16, 256))
    bg = new_threadblock_graph((4, 1, 1), (128, 1, 1), 1)
    bx, ba = bg.new_input(x, (-1, -1, -1), -1), bg.new_input(a, (-1, -1, -1), -1)
    bw, bb = bg.new_input(w, (1, -1, -1), -1), bg.new_input(b, (1, -1, -1), -1)
    xa = bg.matmul(bx, ba)
    bg.new_output(bg.matmul(bg.concat(bx, xa, 1), bg.concat(bw, bb, 0)), (1, -1, -1))
    (o,) = g.customized([x, w, a, b], bg)
    g.mark_output(o)
    module = g.module()

    inputs = random_inputs(module, seed=3)
    np.testing.assert_allclose(
        run(module, inputs)[0], ref_lora(*inputs)[0], rtol=2e-2, atol=2e-2
    )
    (got,) = output_exprs(entry_function(module), INPUT_NAMES["lora"])
    (want,) = targets("lora", 1, 16)
    assert got == want
    oracle = SubexprOracle([want], use_fallback=False)
    values = exprs_of_function(entry_function(module), INPUT_NAMES["lora"])
    assert all(oracle.is_subexpr(e) for e in values.values())


def test_constants_are_variables_of_their_own():
    """x * c is mul(x, const_c): different constants give different terms, and
    rms_norm's eps is the constant added before the sqrt."""
    from mirage_xdsl.search.pruning.abstract_expr import constant, op_expr, var

    x = var("x")
    eighth = op_expr("mul_scalar", [x], [(4, 8)], {"scalar": 0.125})
    assert str(eighth) == "mul(x, const_1_8)"
    assert eighth != op_expr("mul_scalar", [x], [(4, 8)], {"scalar": 0.25})
    assert str(op_expr("add_scalar", [x], [(4, 8)], {"scalar": -1.5})) == (
        "add(x, const_m3_2)"
    )
    plain = op_expr("rms_norm", [x], [(4, 8)], {})
    eps = op_expr("rms_norm", [x], [(4, 8)], {"eps": 1e-6})
    assert plain != eps and constant(1e-6).param in str(eps)


def test_the_op_table_gives_the_heads_and_formulas():
    """A one-operand element-wise op without an ``expr`` formula in the op
    table is an uninterpreted head of its own name (the row maximum too);
    one with a formula is that formula over the terms."""
    from mirage_xdsl.ops import OPS, Form, elementwise_kinds
    from mirage_xdsl.search.pruning.abstract_expr import UNARY_HEADS

    one_operand = [k for k in elementwise_kinds() if OPS[k].form is not Form.BINARY]
    uninterpreted = {k for k in one_operand if OPS[k].expr is None}
    assert set(UNARY_HEADS) == uninterpreted | {"max"}
    x = var("x")
    for kind in uninterpreted:
        term = op_expr(kind, [x], [(4, 8)], {"scalar": 0.5})
        assert term == Expr(kind, (x,))
    assert str(op_expr("square", [x], [(4, 8)])) == "mul(x, x)"


@pytest.mark.parametrize(
    "small,big",
    [("relu(x)", "gelu(x)"), ("sigmoid(x)", "silu(x)"), ("tanh(y)", "tanh(x)")],
)
def test_activation_heads_are_distinct(small: str, big: str):
    """No activation is a subexpression of another's term on its own."""
    oracle = SubexprOracle([P(big)], use_fallback=False)
    assert oracle.fast_is_subexpr(P(small)) is False


def test_row_maximum_is_an_uninterpreted_head() -> None:
    """reduce_max is max(x) (its element count dropped, like a mean's); every
    value of the safe softmax is a subexpression of its output, and the
    shift, the maximum and the sum are three different terms."""
    from softmax_program import softmax_module

    assert str(op_expr("reduce_max", [var("x")], [(4, 8)], {"dim": 1})) == "max(x)"
    module = softmax_module((4, 8))
    values = exprs_of_function(entry_function(module), ["x"])
    (out,) = output_exprs(entry_function(module), ["x"])
    assert str(out) == (
        "div(exp(add(x, neg(max(x)))), sum(8, exp(add(x, neg(max(x))))))"
    )
    oracle = SubexprOracle([out], use_fallback=False)
    assert all(oracle.is_subexpr(e) for e in values.values())
    for other in ("sum(8, x)", "exp(x)", "max(exp(x))", "exp(add(x, max(x)))"):
        assert SubexprOracle([out], use_fallback=False).is_subexpr(P(other)) is False
    assert not equivalent(P("max(x)"), P("sum(8, x)"))


def test_row_maximum_pushes_through_pieces() -> None:
    """A maximum along a dim that is not concatenated is taken piece by
    piece; along the concatenated dim the pieces meet in one max."""
    a, b = var("a"), var("b")
    cat = op_expr("concat", [a, b], [(4, 8), (4, 8)], {"dim": 0})
    across = op_expr("reduce_max", [cat], [(8, 8)], {"dim": 1})
    assert str(across) == str(
        op_expr("concat", [P("max(a)"), P("max(b)")], [(4, 1), (4, 1)], {"dim": 0})
    )
    along = op_expr("reduce_max", [cat], [(8, 8)], {"dim": 0})
    assert str(along) == "max(add(a, b))"


@pytest.mark.parametrize("reduction", ["none", "sum", "mean", "rms"])
def test_accumulating_a_concatenation_accumulates_each_piece(reduction: str) -> None:
    """The loop's iterations add element by element, so accumulating a tile
    concatenated along a dim the accumulation keeps leaves the concatenation
    at the top of the term, where the oracle judges each piece."""
    x, y = var("x"), var("y")
    cat = op_expr("concat", [x, y], [(4, 8), (4, 8)], {"dim": 0})
    acc = op_expr(
        "forloop_accum", [cat], [(8, 8)], {"reduction": reduction, "forloop": 2}
    )
    assert acc.head == "concat"
    pieces = [
        op_expr("forloop_accum", [v], [(4, 8)], {"reduction": reduction, "forloop": 2})
        for v in (x, y)
    ]
    assert str(acc) == str(
        op_expr(
            "concat", pieces, [(4, 1 if reduction != "none" else 8)] * 2, {"dim": 0}
        )
    )


def test_a_nested_concatenation_with_a_head_no_target_has_is_pruned() -> None:
    """Where a concatenation sits under another op the term has no normal
    form; a head or variable that no target holds still rules it out (no
    axiom removes one), and a term made only of the targets' marks is kept."""
    (target,) = targets("lora")
    oracle = SubexprOracle([target], use_fallback=False)
    cat = op_expr("concat", [var("X"), var("B")], [(1, 4), (1, 4)], {"dim": 1})
    nested = Expr("sum", (cat,), 2)
    assert oracle.is_subexpr(nested)
    assert oracle.stats.undecided == 1
    for head in ("relu", "exp"):
        assert not oracle.is_subexpr(op_expr(head, [nested], [(1, 8)], {}))
    foreign = op_expr("mul", [nested, var("Z")], [(1, 8), (1, 8)], {})
    assert not oracle.is_subexpr(foreign)
    assert not oracle.is_subexpr(P("div(X, W)"))
