"""The finite-field fingerprint domain of the equivalence verifier.

Every value is a pair ``(x_p, x_q)`` in Z_p x Z_q with ``p = 2q + 1``, both
prime. Ring operations act on each component; division multiplies by a modular
inverse; ``exp`` maps the Z_q component to ``omega ** x_q`` in Z_p, where
``omega`` generates the subgroup of order q of Z_p^*, so ``exp(a + b) =
exp(a) * exp(b)`` holds exactly (exponents live in Z_q because ``omega ** q =
1``). ``sqrt`` has no algebraic counterpart in a finite field; it is a per-trial
random function of its argument (see :class:`FiniteFieldDomain`).
``docs/verifier.md`` derives the false-positive bound these choices give.

Encoding. A domain value is a numpy *structured* array with fields ``p`` and
``q`` (both int64, reduced) whose shape is the tensor's logical shape: the
interpreter reshapes, transposes, broadcasts and concatenates values itself, and
numpy applies those to both fields at once. Keeping the components apart (rather
than one CRT residue mod pq ~ 2^61) keeps every product of two residues below
2^62, so int64 arithmetic never overflows:

- residues are < p < 2^31, so a product of two is < 2^62 < 2^63;
- :func:`mulmod` reduces a product with a float64 quotient estimate: the exact
  quotient is < 2^31 and its float64 estimate is off by < 1, so the remainder
  lies in (-m, 2m) and one correction step makes it exact;
- :func:`matmod` splits each residue into 16-bit limbs (lo < 2^16, hi < 2^15)
  and multiplies limbs as float64 BLAS matmuls (Karatsuba, three products).
  The largest limb product is (lo + hi)^2 < 2^34, so a contraction of K terms
  stays below 2^34 * K, exact in float64 (53-bit mantissa) while K <= 2^19;
  longer contractions are cut into chunks of 2^19;
- sums of residues: at most 2^32 terms of < 2^31 each, < 2^63.

``tests/test_finite_field.py`` checks these bounds at their extremes against
Python's exact integers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

P = 2147483579
"""The large prime: 2q + 1, just below 2^31."""
Q = 1073741789
"""The exponent prime: q divides p - 1, so Z_p^* has a subgroup of order q."""

FIELD = np.dtype([("p", np.int64), ("q", np.int64)])
"""A fingerprint value: its residue mod p and its residue mod q."""

MAX_CHUNK = 1 << 19
"""Longest contraction one float64 limb product may sum exactly (2^34 * K < 2^53)."""
LIMB_BITS = 16
LIMB_MASK = (1 << LIMB_BITS) - 1
MAX_SUM_TERMS = 1 << 32
"""Most residues (< 2^31) an int64 sum may add before reducing."""


def reduce(x: np.ndarray, m: int) -> np.ndarray:
    """``x mod m`` for integers ``0 <= x < 2^53`` (int64 or exact float64).

    Computed in float64, where every step is exact: ``x`` is representable,
    the quotient estimate ``floor(x / m)`` is off by at most one either way
    (x/m < 2^23 is computed to within 2^-29), ``quotient * m < 2^53`` and the
    remainder lies in [-m, 2m) before one correction step.
    """
    return _reduce_float(np.asarray(x, np.float64), m).astype(np.int64)


def _reduce_float(x: np.ndarray, m: int) -> np.ndarray:
    r = x - np.floor(x * (1.0 / m)) * m
    r += m * (r < 0)
    r -= m * (r >= m)
    return r


def mulmod(a: np.ndarray, b: np.ndarray | int, m: int) -> np.ndarray:
    """``a * b mod m`` for residues in [0, m), m < 2^31.

    ``a * b < 2^62`` is exact in int64; the quotient estimate
    ``floor(a * b / m)`` in float64 is within one of the true quotient
    (< 2^31), so the remainder below is in (-m, 2m) before correction.
    """
    a = np.asarray(a, np.int64)
    product = a * b
    scaled = np.asarray(b, np.float64) * (1.0 / m)
    quotient = np.floor(a.astype(np.float64) * scaled).astype(np.int64)
    r = product - quotient * m
    r += m * (r < 0)
    r -= m * (r >= m)
    return r


def addmod(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    s = a + b
    s -= m * (s >= m)
    return s


def negmod(a: np.ndarray, m: int) -> np.ndarray:
    return np.where(a == 0, 0, m - a)


def powmod(a: np.ndarray, e: int, m: int) -> np.ndarray:
    """``a ** e mod m`` elementwise, by square-and-multiply."""
    result = np.ones_like(a)
    base = a.copy()
    while e:
        if e & 1:
            result = mulmod(result, base, m)
        base = mulmod(base, base, m)
        e >>= 1
    return result


def invmod(a: np.ndarray, m: int) -> np.ndarray:
    """Inverse mod the prime m (Fermat); 0 maps to 0."""
    return powmod(a, m - 2, m)


def _limb_matmul(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    """``a @ b mod m`` for a contraction of at most MAX_CHUNK terms.

    With 16-bit limbs ``a = a1 * 2^16 + a0`` the product is
    ``(a1 b1) 2^32 + ((a0 + a1)(b0 + b1) - a0 b0 - a1 b1) 2^16 + a0 b0``; every
    limb product sum is an exact float64 integer (< 2^34 * MAX_CHUNK = 2^53),
    and the three are combined by Horner's rule with a reduction after each
    step, so no intermediate exceeds 2^47 + 2^31.
    """

    def limbs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (
            (x & LIMB_MASK).astype(np.float64, order="C"),
            (x >> LIMB_BITS).astype(np.float64, order="C"),
        )

    a0, a1 = limbs(a)
    b0, b1 = limbs(b)
    low = np.matmul(a0, b0)
    high = np.matmul(a1, b1)
    middle = np.matmul(a0 + a1, b0 + b1)
    middle -= low
    middle -= high
    r = _reduce_float(high, m) * float(1 << LIMB_BITS)
    r += _reduce_float(middle, m)
    r = _reduce_float(r, m) * float(1 << LIMB_BITS)
    r += _reduce_float(low, m)
    return _reduce_float(r, m).astype(np.int64)


def matmod(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    """Batched ``a @ b mod m`` (last two axes), exact for any contraction length."""
    k = a.shape[-1]
    result = None
    for start in range(0, k, MAX_CHUNK):
        part = _limb_matmul(
            a[..., start : start + MAX_CHUNK], b[..., start : start + MAX_CHUNK, :], m
        )
        result = part if result is None else addmod(result, part, m)
    assert result is not None
    return result


def summod(x: np.ndarray, axes: tuple[int, ...], m: int) -> np.ndarray:
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if count > MAX_SUM_TERMS:
        raise ValueError(f"a sum of {count} terms would overflow int64")
    # The sum may exceed 2^53, so reduce it with exact integer division.
    return np.remainder(np.sum(x, axis=axes, keepdims=True, dtype=np.int64), m)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of 64-bit words that mixes every bit."""
    z = z ^ (z >> np.uint64(30))
    z = z * np.uint64(0xBF58476D1CE4E5B9)
    z = z ^ (z >> np.uint64(27))
    z = z * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def field(p_part: np.ndarray, q_part: np.ndarray) -> np.ndarray:
    """Pack two residue arrays (broadcast together) into one domain value."""
    p_part, q_part = np.broadcast_arrays(p_part, q_part)
    out = np.empty(p_part.shape, FIELD)
    out["p"] = p_part
    out["q"] = q_part
    return out


def power_table(base: int, size: int, m: int) -> np.ndarray:
    """``[base ** 0, ..., base ** (size - 1)] mod m`` by doubling."""
    table = np.ones(1, np.int64)
    while len(table) < size:
        table = np.concatenate([table, mulmod(table, pow(base, len(table), m), m)])
    return table[:size]


class FiniteFieldDomain:
    """Z_p x Z_q arithmetic for one verification trial.

    A trial's randomness is drawn once in the constructor and shared by both
    programs being compared: the exponent base ``omega`` (a random generator of
    the order-q subgroup), and the keys of two random functions:

    - ``sqrt(x)`` is a keyed 64-bit hash of the pair (x_p, x_q) reduced mod p
      and mod q. It is a function, so equal arguments give equal results and
      every rewrite that computes the *argument* of a sqrt differently (sums
      reordered, split across blocks or for-loop iterations, means rescaled) is
      recognised. Identities *through* sqrt (``sqrt(a) sqrt(b) = sqrt(ab)``,
      ``sqrt(4x) = 2 sqrt(x)``, ``sqrt(x)^2 = x``) are not: a program relying
      on them is reported not equivalent. That costs completeness, never
      soundness of an accepting verdict.
    - the Z_q component of ``exp(x)`` is its Z_p component reduced mod q: the
      Z_q component is only ever used as an exponent, and nested exponentials
      have no faithful finite-field image, so ``exp(exp(..))`` is merely some
      fixed function of its argument (sound, like sqrt; no identities through
      it are recognised).

    ``silu(x) = x / (1 + exp(-x))`` is evaluated from these pieces. Division by
    zero yields zero and is counted in ``zero_divisors``.
    """

    name = "finite-field"

    def __init__(self, seed: int | np.random.Generator = 0):
        rng = np.random.default_rng(seed)
        h = int(rng.integers(2, P - 1))
        self.omega = h * h % P
        if self.omega == 1:  # only h = +-1 squares to 1; excluded above
            raise AssertionError("omega must have order q")
        keys = rng.integers(0, 2**63, size=4, dtype=np.uint64)
        self._sqrt_keys = (keys[0], keys[1])
        self._low = power_table(self.omega, 1 << 15, P)
        self._high = power_table(pow(self.omega, 1 << 15, P), 1 << 15, P)
        self.zero_divisors = 0

    # --- conversion ----------------------------------------------------------

    def load(self, array: np.ndarray) -> np.ndarray:
        array = np.asarray(array)
        if array.dtype == FIELD:
            return array
        if not np.issubdtype(array.dtype, np.integer):
            raise TypeError("finite-field values are made from integers or pairs")
        a = array.astype(np.int64)
        return field(np.mod(a, P), np.mod(a, Q))

    def random(self, rng: np.random.Generator, shape: Sequence[int]) -> np.ndarray:
        """A uniformly random value: independent uniform residues mod p and q."""
        return field(rng.integers(0, P, shape), rng.integers(0, Q, shape))

    def constant(self, value: int, ndim: int) -> np.ndarray:
        return self.load(np.full((1,) * ndim, value, np.int64))

    # --- arithmetic ----------------------------------------------------------

    def add(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return field(addmod(x["p"], y["p"], P), addmod(x["q"], y["q"], Q))

    def mul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return field(mulmod(x["p"], y["p"], P), mulmod(x["q"], y["q"], Q))

    def div(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        self.zero_divisors += int(np.count_nonzero((y["p"] == 0) | (y["q"] == 0)))
        inverse = field(invmod(y["p"], P), invmod(y["q"], Q))
        return self.mul(x, inverse)

    def exp(self, x: np.ndarray) -> np.ndarray:
        e = x["q"]
        value = mulmod(self._high[e >> 15], self._low[e & 0x7FFF], P)
        return field(value, reduce(value, Q))

    def silu(self, x: np.ndarray) -> np.ndarray:
        minus = field(negmod(x["p"], P), negmod(x["q"], Q))
        return self.div(x, self.add(self.exp(minus), self.constant(1, x.ndim)))

    def sqrt(self, x: np.ndarray) -> np.ndarray:
        k_p, k_q = self._sqrt_keys
        return field(
            self._hash(x, k_p) % np.uint64(P), self._hash(x, k_q) % np.uint64(Q)
        )

    def square(self, x: np.ndarray) -> np.ndarray:
        return self.mul(x, x)

    def matmul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return field(matmod(x["p"], y["p"], P), matmod(x["q"], y["q"], Q))

    def sum(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return field(summod(x["p"], axes, P), summod(x["q"], axes, Q))

    def div_count(self, x: np.ndarray, count: int) -> np.ndarray:
        return self.mul(
            x, field(np.int64(pow(count, -1, P)), np.int64(pow(count, -1, Q)))
        )

    # --- helpers -------------------------------------------------------------

    @staticmethod
    def _hash(x: np.ndarray, key: np.uint64) -> np.ndarray:
        """A keyed hash of (x_p, x_q): injective packing, then two mixing rounds."""
        packed = (x["p"].astype(np.uint64) << np.uint64(31)) | x["q"].astype(np.uint64)
        return _mix(_mix(packed ^ key) + key)
