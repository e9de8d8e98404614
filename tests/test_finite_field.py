"""The finite-field domain: exact modular arithmetic at the overflow limits,
the Z_q slice, and the torch arithmetic's bit-identity with numpy's."""

import numpy as np
import pytest
from softmax_program import attention_module, softmax_module

from mirage_xdsl.fuzz.programs import random_module
from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.ops import OPS
from mirage_xdsl.semantics.interpreter import entry_function, run
from mirage_xdsl.verify import residue_arith as ff
from mirage_xdsl.verify.fingerprint_slice import (
    ResidueSlice,
    exponent_only_ops,
    residue_slice,
)
from mirage_xdsl.verify.finite_field import (
    KEY_SALTS,
    KEYED_KINDS,
    FiniteFieldDomain,
    P,
    Q,
    Residues,
)
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        x = pow(a, d, n)
        if x in (1, n - 1) or a % n == 0:
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def exact_matmul(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    """Python-integer reference for a batched modular matmul."""
    ai, bi = a.astype(np.int64).astype(object), b.astype(np.int64).astype(object)
    return np.vectorize(lambda v: v % m, otypes=[object])(np.matmul(ai, bi))


def test_primes() -> None:
    assert is_prime(P) and is_prime(Q)
    assert P == 2 * Q + 1
    assert P < 2**26  # products of two residues stay below 2^52
    assert (ff.LIMB - 1) * (P - 1) * 2 * ff.MAX_CHUNK < 2**53


def test_mulmod_at_the_extremes() -> None:
    for m in (P, Q):
        edge = np.array([0, 1, 2, m - 2, m - 1, m // 2, (m + 1) // 2], np.float64)
        a, b = np.meshgrid(edge, edge)
        got = ff.mulmod(a, b, m)
        want = [[int(x) * int(y) % m for x, y in zip(r, s, strict=True)] for r, s in zip(a, b, strict=True)]  # fmt: skip
        assert np.array_equal(got, np.array(want, np.float64))


@pytest.mark.parametrize("shapes", [((2, 5, 33), (2, 33, 4)), ((2, 40, 3), (2, 3, 40))])
def test_matmul_exact_against_python_integers(shapes) -> None:
    # The first shape takes the two-product path, the second the stacked one.
    rng = np.random.default_rng(0)
    for m in (P, Q):
        a = rng.integers(0, m, shapes[0]).astype(np.float64)
        b = rng.integers(0, m, shapes[1]).astype(np.float64)
        assert np.array_equal(
            ff.matmod(a, b, m), exact_matmul(a, b, m).astype(np.float64)
        )


def test_matmul_worst_case_contraction() -> None:
    # Every residue at its maximum over a full chunk plus a second chunk: the
    # float64 partial sums come within a factor two of 2^53 on both paths.
    k = ff.MAX_CHUNK + 3
    a = np.full((1, k), P - 1, np.float64)
    b = np.full((k, 1), P - 1, np.float64)
    want = k * (P - 1) ** 2 % P
    assert int(ff.matmod(a, b, P)[0, 0]) == want
    wide_a, wide_b = np.full((2, k), P - 1.0), np.full((k, 3), P - 1.0)
    chunks = [
        ff._stacked_matmul(
            wide_a[:, s : s + ff.MAX_CHUNK], wide_b[s : s + ff.MAX_CHUNK], P
        )
        for s in range(0, k, ff.MAX_CHUNK)
    ]
    assert int(ff.addmod(chunks[0], chunks[1], P)[1, 2]) == want


def test_sum_and_reduce_limits() -> None:
    x = np.full((4096, 4096), P - 1, np.float64)
    assert int(ff.summod(x, (0, 1), P)[0, 0]) == 4096 * 4096 * (P - 1) % P
    big = np.array([2**53 - 1, 2**53 - 2, 0, P, P - 1, 2 * P - 1], np.float64)
    assert list(ff.reduce(big, P)) == [int(v) % P for v in big]
    long = np.broadcast_to(np.ones(1), (ff.MAX_SUM_TERMS + 1,))
    with pytest.raises(ValueError, match="not be exact"):
        ff.summod(long, (0,), P)


def test_exp_is_a_homomorphism_of_order_q() -> None:
    d = FiniteFieldDomain(3)
    rng = np.random.default_rng(1)
    a, b = d.random(rng, (100,)), d.random(rng, (100,))
    assert np.array_equal(d.exp(d.add(a, b)).p, d.mul(d.exp(a), d.exp(b)).p)
    assert np.all(d.exp(d.load(np.zeros(3, np.int64))).p == 1)
    assert pow(d.omega, Q, P) == 1 and d.omega != 1
    assert d.exp(a).q is not None  # exp_keeps_q defaults to on
    assert FiniteFieldDomain(3, exp_keeps_q=False).exp(a).q is None
    with pytest.raises(AssertionError, match="lacks its Z_q"):
        d.exp(Residues(a.p, None))


def test_division_and_counts() -> None:
    d = FiniteFieldDomain(0)
    rng = np.random.default_rng(2)
    x, y = d.random(rng, (50,)), d.random(rng, (50,))
    back = d.mul(d.div(x, y), y)
    assert np.array_equal(back.p, x.p) and np.array_equal(back.q, x.q)
    four = d.div_count(d.load(np.full(5, 4 * 7, np.int64)), 4)
    assert np.all(four.p == 7) and np.all(four.q == 7)
    d.div(x, d.load(np.zeros(50, np.int64)))
    assert d.zero_divisors == 100  # both components


def test_sqrt_is_a_nonzero_function_random_per_trial() -> None:
    rng = np.random.default_rng(3)
    d1, d2 = FiniteFieldDomain(1), FiniteFieldDomain(2)
    x = d1.random(rng, (1000,))
    s = d1.sqrt(np.concatenate([x, x]))
    assert np.array_equal(s.p[:1000], s.p[1000:]) and np.array_equal(
        s.q[:1000], s.q[1000:]
    )
    assert np.array_equal(d1.sqrt(x).p, FiniteFieldDomain(1).sqrt(x).p)
    assert np.mean(d1.sqrt(x).p == d2.sqrt(x).p) < 0.01
    assert np.all((s.p > 0) & (s.p < P)) and np.all((s.q >= 0) & (s.q < Q))


def test_silu_matches_its_definition() -> None:
    d = FiniteFieldDomain(4)
    x = d.random(np.random.default_rng(4), (64,))
    one = d.load(np.ones(64, np.int64))
    want = d.div(x, d.add(one, d.exp(d.neg(x))))
    assert np.array_equal(d.elementwise(OPS["silu"], x).p, want.p)


def test_sigmoid_is_silu_over_x_and_neg_is_exact() -> None:
    d = FiniteFieldDomain(5)
    x = d.random(np.random.default_rng(5), (64,))
    sigmoid = d.elementwise(OPS["sigmoid"], x)
    assert np.array_equal(d.mul(x, sigmoid).p, d.elementwise(OPS["silu"], x).p)
    assert np.all(d.add(x, d.neg(x)).p == 0) and np.all(d.add(x, d.neg(x)).q == 0)


def test_keyed_activations_are_functions_distinct_per_kind() -> None:
    """relu, tanh, gelu, gelu_erf, and the clamps by each of their constants:
    like sqrt, equal arguments give equal values; two kinds (or one clamp at
    two bounds) on the same argument agree only by chance."""
    d = FiniteFieldDomain(6)
    x = d.random(np.random.default_rng(6), (1000,))
    kinds = ("sqrt", "clamp_min", "clamp_max", "relu", "tanh", "gelu", "gelu_erf")
    assert KEYED_KINDS == (*kinds, "log")
    xx = np.concatenate([x, x])
    values = {}
    for k in (*kinds, "log"):
        bounds = OPS[k].constants or (None,)
        for c in bounds:
            args = (xx,) if c is None else (xx, c)
            values[k, c] = d.elementwise(OPS[k], *args)
    assert len(values) == 10
    for k, v in values.items():
        assert np.array_equal(v.p[:1000], v.p[1000:]), k
        assert np.all((v.p > 0) & (v.p < P)), k
    for a in values:
        for b in values:
            if a < b:
                assert np.mean(values[a].p == values[b].p) < 0.01, (a, b)


def test_key_salts_are_pinned() -> None:
    """The keyed kinds come from the op table, their salts from their names:
    sqrt's is 0, and every trial's keyed values stay what they were."""
    assert KEY_SALTS == {
        "sqrt": 0,
        "clamp_min": 3800324817963390898,
        "clamp_max": 1559520370260332951,
        "relu": 3203118445234222979,
        "tanh": 3943191079866540465,
        "gelu": 2644641728253874490,
        "gelu_erf": 2350326325350713635,
        "log": 3525944222442372065,
        "reduce_max": 903247140085329586,
    }


def test_floats_are_refused() -> None:
    with pytest.raises(TypeError):
        FiniteFieldDomain(0).load(np.ones(3, np.float32))


def test_layout_steps_apply_to_both_components() -> None:
    d = FiniteFieldDomain(5)
    x = d.random(np.random.default_rng(5), (2, 3, 4))
    for y, f in [
        (x.reshape(6, 4), lambda a: a.reshape(6, 4)),
        (x.transpose((2, 0, 1)), lambda a: a.transpose((2, 0, 1))),
        (x[:, 1], lambda a: a[:, 1]),
        (
            np.broadcast_to(x[:, :1], (2, 5, 4)),
            lambda a: np.broadcast_to(a[:, :1], (2, 5, 4)),
        ),
    ]:
        assert np.array_equal(y.p, f(x.p)) and np.array_equal(y.q, f(x.q))
    both = np.concatenate([x, x], axis=1)
    assert both.shape == (2, 6, 4) and both.q is not None
    assert np.concatenate([x, Residues(x.p, None)], axis=0).q is None


# --- the Z_q slice --------------------------------------------------------------


def test_slice_of_attention_leaves_v_out() -> None:
    assert residue_slice(WORKLOADS["gqa"].module(1, 8)) == ResidueSlice(
        frozenset({0, 1}), False
    )
    # rms_norm hashes its argument: every input reaches a sqrt or an exp.
    assert residue_slice(WORKLOADS["qknorm_gqa"].module(1, 8)).inputs == {0, 1, 2}
    assert residue_slice(WORKLOADS["lora"].module(1, 8)).inputs == frozenset()


def test_exponent_only_ops_are_attention_scores() -> None:
    def names(module):
        return sorted(op.name for op in exponent_only_ops(module))

    assert names(WORKLOADS["gqa"].module(1, 8)) == ["kernel.matmul"]
    assert names(HANDWRITTEN["gqa_flashdecoding"][1](1, 8)) == ["block.matmul"]
    assert names(WORKLOADS["gated_mlp"].module(1, 8)) == []  # silu reads both


def test_slice_sees_nested_exponentials() -> None:
    g = new_kernel_graph("nested")
    x = g.new_input((4, 8))
    y = g.new_input((4, 8))
    g.mark_output(g.add(g.exp(g.exp(x)), y))
    assert residue_slice(g.module()) == ResidueSlice(frozenset({0}), True)


def _outputs(module, arith, with_q_everywhere: bool, seed: int = 0):
    sl = residue_slice(module)
    skip = frozenset() if with_q_everywhere else exponent_only_ops(module)
    d = FiniteFieldDomain(
        seed, arith, exp_keeps_q=with_q_everywhere or sl.nested, exponent_only=skip
    )
    rng = np.random.default_rng(seed)
    shapes = [
        tuple(t.get_shape()) for t in entry_function(module).function_type.inputs.data
    ]
    xs = [d.random(rng, s) for s in shapes]  # the same Z_p residues either way
    if not with_q_everywhere:
        xs = [
            x if i in sl.inputs else Residues(x.p, None, arith)
            for i, x in enumerate(xs)
        ]
    return [d.to_numpy(v)[0] for v in run(module, xs, d)]


def test_slice_changes_no_fingerprint() -> None:
    """Computing Z_q only where exp/sqrt read it, and Z_p only where something
    other than an exponent reads it, gives the same output residues."""
    modules = [WORKLOADS[w].module(1, 8) for w in WORKLOADS]
    modules += [b(1, 8) for _, b in HANDWRITTEN.values()]
    modules += [random_module(np.random.default_rng(s)) for s in range(40)]
    modules += [softmax_module(), attention_module(), attention_module(safe=False)]
    skipping = [
        m
        for s in range(40, 400)
        if exponent_only_ops(m := random_module(np.random.default_rng(s)))
    ]
    assert len(skipping) >= 5
    for module in modules + skipping:
        full = _outputs(module, ff.NUMPY, True)
        sliced = _outputs(module, ff.NUMPY, False)
        assert all(np.array_equal(a, b) for a, b in zip(full, sliced, strict=True))


# --- torch ----------------------------------------------------------------------


def test_torch_arithmetic_is_bit_identical_to_numpy() -> None:
    pytest.importorskip("torch")
    from mirage_xdsl.verify.finite_field_torch import TorchArithmetic

    torch_cpu = TorchArithmetic("cpu")
    modules = [WORKLOADS[w].module(1, 4) for w in WORKLOADS]
    modules += [b(2, 4) for _, b in HANDWRITTEN.values()]
    modules += [random_module(np.random.default_rng(s)) for s in range(40)]
    for module in modules:
        want = _outputs(module, ff.NUMPY, False, seed=7)
        got = _outputs(module, torch_cpu, False, seed=7)
        assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))


def test_torch_matmul_paths_match_python_integers() -> None:
    pytest.importorskip("torch")
    from mirage_xdsl.verify.finite_field_torch import TorchArithmetic

    arith = TorchArithmetic("cpu")
    rng = np.random.default_rng(9)
    for sa, sb in [
        ((2, 5, 33), (2, 33, 4)),
        ((2, 40, 3), (2, 3, 40)),
        ((1, 9000), (9000, 2)),
    ]:
        a = rng.integers(0, P, sa).astype(np.float64)
        b = rng.integers(0, P, sb).astype(np.float64)
        got = arith.to_numpy(arith.matmul(arith.array(a), arith.array(b), P))
        assert np.array_equal(got, ff.matmod(a, b, P))


def test_matmul_with_broadcast_batch_axes() -> None:
    # A loop-invariant left tile against per-iteration right tiles, and the
    # reverse: folded into rows and columns of one product, then viewed back.
    rng = np.random.default_rng(11)
    for sa, sb in [((2, 3, 1, 4, 5), (2, 1, 6, 5, 7)), ((1, 4, 3, 2), (3, 1, 2, 5))]:
        a = rng.integers(0, P, sa).astype(np.float64)
        b = rng.integers(0, P, sb).astype(np.float64)
        got = ff.matmod(a, b, P)
        assert got.shape == np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
        assert np.array_equal(got, exact_matmul(a, b, P).astype(np.float64))


def test_row_maximum_is_a_keyed_function_of_the_whole_row() -> None:
    """reduce_max: one value per row, equal for equal rows wherever they sit,
    different when one element changes or the row is reordered, different
    from the per-element keyed kinds, and fresh in every trial."""
    d = FiniteFieldDomain(7)
    rows = d.random(np.random.default_rng(7), (50, 33))
    changed = np.array(d.to_numpy(rows)[0])
    changed[:, 5] = (changed[:, 5] + 1) % P
    changed_q = np.array(d.to_numpy(rows)[1])
    x = Residues(
        np.concatenate([rows.p, rows.p, changed, rows.p[:, ::-1]]),
        np.concatenate([rows.q, rows.q, changed_q, rows.q[:, ::-1]]),
    )
    top = d.reduce_max(x, -1)
    assert top.shape == (200, 1) and top.q is not None
    p = top.p[:, 0]
    assert np.array_equal(p[:50], p[50:100])
    assert np.all(p[:50] != p[100:150]) and np.all(p[:50] != p[150:])
    assert np.all((p > 0) & (p < P)) and np.all((top.q >= 0) & (top.q < Q))
    assert len(set(p[:50].tolist())) == 50
    other = FiniteFieldDomain(8).reduce_max(x, -1).p[:, 0]
    assert np.mean(other == p) < 0.05
    # a column maximum is the same function of the column
    cols = d.reduce_max(Residues(x.p.T.copy(), x.q.T.copy()), -2)
    assert np.array_equal(cols.p[0], p)


def test_shift_by_a_row_maximum_cancels_in_softmax() -> None:
    """exp(x - m) / sum(exp(x - m)) has exactly the residues of
    exp(x) / sum(exp(x)) for the keyed m, and exp(x - m) differs from exp(x)."""
    d = FiniteFieldDomain(9)
    x = d.random(np.random.default_rng(9), (8, 40))
    m = d.reduce_max(x, -1)
    e = d.exp(d.add(x, d.neg(m)))
    safe = d.div(e, d.sum(e, (-1,)))
    plain_e = d.exp(x)
    plain = d.div(plain_e, d.sum(plain_e, (-1,)))
    assert np.array_equal(safe.p, plain.p)
    assert np.mean(e.p == plain_e.p) < 0.01


def test_slice_reads_the_row_of_a_maximum() -> None:
    """A reduce_max argument is hashed with its Z_q residues: the input it
    reads is drawn with them, even where no exp follows."""
    g = new_kernel_graph("maxima")
    x, y = g.new_input((4, 8)), g.new_input((4, 8))
    g.mark_output(g.mul(g.reduce_max(x, 1), y))
    assert residue_slice(g.module()).inputs == frozenset({0})


def test_torch_row_maximum_is_bit_identical_to_numpy() -> None:
    torch_arith = pytest.importorskip("mirage_xdsl.verify.finite_field_torch")
    module = attention_module()
    a = _outputs(module, ff.NUMPY, False)
    b = _outputs(module, torch_arith.TorchArithmetic("cpu"), False)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_matmod_keeps_a_batch_axis_both_operands_broadcast() -> None:
    """``x @ x`` where ``x`` repeats one matrix along a batch axis (a zero
    stride, as a block's replicated input is): the product repeats too, with
    the batch axis whole (fuzz seed field/2580)."""
    one = np.arange(4.0).reshape(1, 2, 2)
    x = np.broadcast_to(one, (3, 2, 2))
    got = ff.matmod(x, x, 7)
    assert got.shape == (3, 2, 2)
    np.testing.assert_array_equal(got, np.broadcast_to(np.mod(one @ one, 7), (3, 2, 2)))


def test_a_large_input_is_drawn_alike_on_any_number_of_threads(monkeypatch):
    from mirage_xdsl.verify import finite_field as ff

    shape = (4, ff.PARTED_DRAW // 4 + 3)
    threaded = ff._uniform(np.random.default_rng(7), ff.P, shape).copy()
    monkeypatch.setattr(ff, "_MAIN_PID", -1)  # as in a forked worker: one thread
    serial = ff._uniform(np.random.default_rng(7), ff.P, shape)
    assert np.array_equal(threaded, serial)
    assert threaded.min() >= 0 and threaded.max() < ff.P
    assert np.array_equal(threaded, np.floor(threaded))
    # each part from its own generator: no two parts repeat each other
    flat = threaded.reshape(-1)
    part = flat.size // ff.DRAW_PARTS
    assert not np.array_equal(flat[:part], flat[part : 2 * part])
    # and a fresh seed gives other values
    other = ff._uniform(np.random.default_rng(8), ff.P, shape)
    assert not np.array_equal(threaded, other)


def test_softplus_is_the_log_of_one_plus_exp_written_out():
    """``softplus`` takes an exp and the log's keyed function of what it
    makes, so its exp results carry their Z_q residues, and it proves equal
    to the ops written out (and to nothing with another constant)."""
    from mirage_xdsl.verify.equivalence import equivalent

    def program(fused: bool, one: float = 1.0):
        g = new_kernel_graph("softplus")
        x = g.new_input((8, 32))
        y = g.softplus(x) if fused else g.log(g.add_scalar(g.exp(x), one))
        g.mark_output(g.mul(y, x))
        return g.module()

    assert residue_slice(program(True)).nested
    assert equivalent(program(True), program(False)).equivalent
    assert not equivalent(program(True), program(False, 0.25)).equivalent
