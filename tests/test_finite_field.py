"""The finite-field domain: exact modular arithmetic at the overflow limits."""

import numpy as np
import pytest

from mirage_xdsl import finite_field as ff
from mirage_xdsl.finite_field import FIELD, FiniteFieldDomain, P, Q


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


def test_primes() -> None:
    assert is_prime(P) and is_prime(Q)
    assert (P - 1) % Q == 0
    assert P < 2**31 and Q < 2**30  # products of residues stay below 2^62


def test_mulmod_at_the_extremes() -> None:
    for m in (P, Q):
        edge = np.array([0, 1, 2, m - 2, m - 1, m // 2, (m + 1) // 2], np.int64)
        a, b = np.meshgrid(edge, edge)
        got = ff.mulmod(a, b, m)
        want = np.array(
            [
                [int(x) * int(y) % m for x, y in zip(r, s, strict=True)]
                for r, s in zip(a, b, strict=True)
            ]  # fmt: skip
        )
        assert np.array_equal(got, want)


def test_matmul_exact_against_python_integers() -> None:
    rng = np.random.default_rng(0)
    for m in (P, Q):
        a = rng.integers(0, m, (2, 5, 33))
        b = rng.integers(0, m, (2, 33, 4))
        want = [
            [[sum(int(a[z, i, k]) * int(b[z, k, j]) for k in range(33)) % m
              for j in range(4)] for i in range(5)] for z in range(2)
        ]  # fmt: skip
        assert np.array_equal(ff.matmod(a, b, m), np.array(want))


def test_matmul_worst_case_contraction() -> None:
    # Every limb at its maximum over a full 2^19-term chunk plus a second chunk:
    # the float64 partial sums reach 2^53 - they must still be exact.
    k = ff.MAX_CHUNK + 3
    a = np.full((1, k), P - 1, np.int64)
    b = np.full((k, 1), P - 1, np.int64)
    assert int(ff.matmod(a, b, P)[0, 0]) == k * (P - 1) ** 2 % P
    low = np.full((1, k), 0xFFFF, np.int64)  # largest low limb, zero high limb
    assert int(ff.matmod(low, low.T, P)[0, 0]) == k * 0xFFFF**2 % P


def test_sum_and_reduce_limits() -> None:
    x = np.full((4096, 4096), P - 1, np.int64)
    assert int(ff.summod(x, (0, 1), P)[0, 0]) == 4096 * 4096 * (P - 1) % P
    big = np.array([2**53 - 1, 2**53 - 2, 0, P, P - 1], np.int64)
    assert list(ff.reduce(big, P)) == [int(v) % P for v in big]


def test_exp_is_a_homomorphism_of_order_q() -> None:
    d = FiniteFieldDomain(3)
    rng = np.random.default_rng(1)
    a, b = d.random(rng, (100,)), d.random(rng, (100,))
    lhs = d.exp(d.add(a, b))["p"]
    rhs = d.mul(d.exp(a), d.exp(b))["p"]
    assert np.array_equal(lhs, rhs)
    zero = d.load(np.zeros(3, np.int64))
    assert np.all(d.exp(zero)["p"] == 1)
    assert pow(d.omega, Q, P) == 1 and d.omega != 1


def test_division_and_counts() -> None:
    d = FiniteFieldDomain(0)
    rng = np.random.default_rng(2)
    x, y = d.random(rng, (50,)), d.random(rng, (50,))
    back = d.mul(d.div(x, y), y)
    assert np.array_equal(back, x)
    four = d.div_count(d.load(np.full(5, 4 * 7, np.int64)), 4)
    assert np.all(four["p"] == 7) and np.all(four["q"] == 7)
    d.div(x, d.load(np.zeros(50, np.int64)))
    assert d.zero_divisors == 50


def test_sqrt_is_a_function_and_random_per_trial() -> None:
    rng = np.random.default_rng(3)
    d1, d2 = FiniteFieldDomain(1), FiniteFieldDomain(2)
    x = d1.random(rng, (1000,))
    same = np.concatenate([x, x])
    s = d1.sqrt(same)
    assert np.array_equal(s[:1000], s[1000:])
    assert np.array_equal(d1.sqrt(x), FiniteFieldDomain(1).sqrt(x))
    assert np.mean(d1.sqrt(x)["p"] == d2.sqrt(x)["p"]) < 0.01
    assert s.dtype == FIELD and np.all(s["p"] < P) and np.all(s["q"] < Q)


def test_silu_matches_its_definition() -> None:
    d = FiniteFieldDomain(4)
    x = d.random(np.random.default_rng(4), (64,))
    minus = d.mul(x, d.load(np.full(64, -1, np.int64)))
    one = d.load(np.ones(64, np.int64))
    assert np.array_equal(d.silu(x)["p"], d.div(x, d.add(one, d.exp(minus)))["p"])


def test_floats_are_refused() -> None:
    with pytest.raises(TypeError):
        FiniteFieldDomain(0).load(np.ones(3, np.float32))
