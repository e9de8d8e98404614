"""The finite-field fingerprint domain of the equivalence verifier.

Every value is a pair ``(x_p, x_q)`` in Z_p x Z_q with ``p = 2q + 1``, both
prime. Ring operations act on each component; division multiplies by a modular
inverse; ``exp`` maps the Z_q component to ``omega ** x_q`` in Z_p, where
``omega`` generates the subgroup of order q of Z_p^*, so ``exp(a + b) =
exp(a) * exp(b)`` holds exactly (exponents live in Z_q because ``omega ** q =
1``). ``sqrt`` has no algebraic counterpart in a finite field; it is a per-trial
random function of its argument (see :class:`FiniteFieldDomain`), and so is
every op the op table marks ``KEYED`` (``relu``, ``tanh``, ``gelu``, ...), each
with its own keys. ``neg`` is ``p - x``. Every other element-wise op is its
table entry's field formula over these steps (``sigmoid`` is ``1 / (1 +
exp(-x))``). ``docs/verifier.md`` derives the false-positive bound these
choices give.

Only the work the bound needs. The Z_q component matters only where a value
is exponentiated or hashed by ``sqrt``; a :class:`Residues` value carries it
only then (``q is None`` otherwise), and an operation keeps it only when every
operand has it. The verifier decides which inputs need it
(``fingerprint_slice.py``), so everything upstream of an ``exp`` or ``sqrt``
argument has its exact Z_q image and nothing else pays for one.

Arithmetic. Residues are float64 integers below 2^26, so products are exact
and BLAS does the contractions (``residue_arith.py`` says why every step is
exact). The same steps run in numpy (``residue_arith.NUMPY``) or in torch
(``finite_field_torch.py``), on the CPU or on a GPU; exact integer arithmetic
makes them bit-identical.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from mirage_xdsl.cpus import usable_cpus
from mirage_xdsl.ops import OPS, OpSpec, elementwise_kinds
from mirage_xdsl.verify.buffer_pool import pool
from mirage_xdsl.verify.keyed_hash import keyed_hash, keyed_word, row_digest
from mirage_xdsl.verify.residue_arith import EXP_LOW_BITS, NUMPY, mulmod

P = 67108187
"""The large prime: 2q + 1, just below 2^26."""
Q = 33554093
"""The exponent prime: q divides p - 1, so Z_p^* has a subgroup of order q."""


def field_rational(c: float) -> int:
    """The finite float ``c`` as one residue mod p*q: numerator times the
    inverse of its power-of-two denominator (CRT: reducing it mod p and mod q
    gives each component's image of the same rational)."""
    num, den = float(c).as_integer_ratio()
    m = P * Q
    return num % m * pow(den, -1, m) % m


KEYED_KINDS = tuple(k for k in elementwise_kinds() if OPS[k].keyed)
"""Kinds without an algebraic image in the field (the op table's ``KEYED``
entries): per-trial random functions."""


@functools.cache
def _salt(kind: str) -> int:
    """A fixed 62-bit salt for ``kind``'s keys; sqrt's is 0, so its values
    are those it always had, and every other kind gets a function of its own."""
    if kind == "sqrt":
        return 0
    return int.from_bytes(hashlib.blake2b(kind.encode(), digest_size=8).digest()) >> 2


ROW_KEYED_KINDS = ("reduce_max",)
"""Reductions without an algebraic image: a per-trial random function of the
whole row (its residues in order), one value per row."""
KEY_SALTS = {kind: _salt(kind) for kind in (*KEYED_KINDS, *ROW_KEYED_KINDS)}
"""Per-kind salts XORed into a trial's sqrt keys."""

# --- values -------------------------------------------------------------------


class Residues:
    """One fingerprint tensor: its residues mod p and, where needed, mod q.

    It behaves like an array for the interpreter's layout steps (``shape``,
    ``reshape``, ``transpose``, ``swapaxes``, indexing, ``np.broadcast_to`` and
    ``np.concatenate``), applying each to both components. Values are never
    written in place once made.
    """

    __slots__ = ("p", "q", "arith")

    def __init__(self, p: Any, q: Any | None, arith: Any = NUMPY):
        self.p, self.q, self.arith = p, q, arith

    def _map(self, fn: Any) -> Residues:
        p = None if self.p is None else fn(self.p)
        return Residues(p, None if self.q is None else fn(self.q), self.arith)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple((self.q if self.p is None else self.p).shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def reshape(self, *shape: Any) -> Residues:
        dims = (
            tuple(shape[0])
            if len(shape) == 1 and not isinstance(shape[0], int)
            else shape
        )
        return self._map(lambda x: x.reshape(dims))

    def transpose(self, axes: Sequence[int]) -> Residues:
        return self._map(lambda x: self.arith.permute(x, list(axes)))

    def swapaxes(self, a: int, b: int) -> Residues:
        """Swap two (negative) axes; a component left out stays out."""

        def swap(x: Any) -> Any:
            axes = list(range(x.ndim))
            axes[a], axes[b] = axes[b], axes[a]
            return self.arith.permute(x, axes)

        return self._map(swap)

    def __getitem__(self, index: Any) -> Residues:
        return self._map(lambda x: x[index])

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func is np.broadcast_to:
            shape = kwargs.get("shape", args[1] if len(args) > 1 else None)
            return self._map(lambda x: self.arith.broadcast(x, tuple(shape)))
        if func is np.concatenate:
            axis = kwargs.get("axis", args[1] if len(args) > 1 else 0)
            return concatenate(list(args[0]), axis)
        return NotImplemented

    def __repr__(self) -> str:
        return (
            f"Residues(shape={self.shape}, q={'yes' if self.q is not None else 'no'})"
        )


def concatenate(values: Sequence[Residues], axis: int) -> Residues:
    """Concatenate; the result has a Z_q component only if every part has one."""
    arith = values[0].arith
    p = arith.cat([v.p for v in values], axis)
    if any(v.q is None for v in values):
        return Residues(p, None, arith)
    return Residues(p, arith.cat([v.q for v in values], axis), arith)


DRAW_PARTS = 16
"""Parts an input of :data:`PARTED_DRAW` elements or more is drawn in, each
from its own generator seeded from the trial's, on threads. The parts are
fixed, so the values are the same on any machine and with any number of
threads. On the 16-core GPU machine a verdict of the batch-8 decode
attention over a 4096-key cache spent 6.6 of its 8.1 s in its 90 draws,
each in one piece; in parts the verdict took 2.1-2.9 s."""

PARTED_DRAW = 1 << 20

_MAIN_PID = os.getpid()
"""The process that imported this module: forked verifier workers, one per
core, draw on one thread."""


def _uniform(rng: np.random.Generator, m: int, shape: Sequence[int]) -> np.ndarray:
    """Uniform residues mod m as float64 (drawn as int32: half the memory)."""
    out = pool().empty(shape)
    if out.size < PARTED_DRAW:
        np.copyto(out, rng.integers(0, m, shape, dtype=np.int32), casting="unsafe")
        return out
    flat = out.reshape(-1)
    seeds = np.random.SeedSequence(int(rng.integers(2**63))).spawn(DRAW_PARTS)

    def draw(part: int) -> None:
        lo = flat.size * part // DRAW_PARTS
        hi = flat.size * (part + 1) // DRAW_PARTS
        values = np.random.default_rng(seeds[part]).integers(0, m, hi - lo, np.int32)
        np.copyto(flat[lo:hi], values, casting="unsafe")

    threads = usable_cpus() if os.getpid() == _MAIN_PID else 1
    if threads < 2:
        for part in range(DRAW_PARTS):
            draw(part)
    else:
        with ThreadPoolExecutor(min(threads, DRAW_PARTS)) as workers:
            list(workers.map(draw, range(DRAW_PARTS)))
    return out


def power_table(base: int, size: int, m: int) -> np.ndarray:
    """``[base ** 0, ..., base ** (size - 1)] mod m`` as float64, by doubling."""
    table = np.ones(1, np.float64)
    while len(table) < size:
        table = np.concatenate(
            [table, mulmod(table, float(pow(base, len(table), m)), m)]
        )
    return table[:size]


class FiniteFieldDomain:
    """Z_p x Z_q arithmetic for one verification trial.

    A trial's randomness is drawn once in the constructor and shared by both
    programs being compared: the exponent base ``omega`` (a random generator of
    the order-q subgroup), and the keys of a random function:

    - ``sqrt(x)`` is a keyed hash of the pair (x_p, x_q), reduced to a
      *nonzero* residue mod p (so a sqrt value is never a zero divisor) and to
      a residue mod q. It is a function, so equal arguments give equal results
      and every rewrite that computes the *argument* of a sqrt differently
      (sums reordered, split across blocks or for-loop iterations, means
      rescaled) is recognised. Identities *through* sqrt (``sqrt(a) sqrt(b) =
      sqrt(ab)``, ``sqrt(4x) = 2 sqrt(x)``, ``sqrt(x)^2 = x``) are not: a
      program relying on them is reported not equivalent. That costs
      completeness, never soundness of an accepting verdict.
    - the Z_q component of ``exp(x)`` is its Z_p component reduced mod q: the
      Z_q component is only ever used as an exponent, and nested exponentials
      have no faithful finite-field image, so ``exp(exp(..))`` is merely some
      fixed function of its argument (sound, like sqrt; no identities through
      it are recognised). It is only computed when ``exp_keeps_q`` says a
      program nests them.

    - the other :data:`KEYED_KINDS` (``relu``, ``tanh``, ...) are random
      functions like sqrt, each keyed by sqrt's keys salted with its ``KIND``
      (:data:`KEY_SALTS`): equal arguments meet, different kinds never share
      values by construction. A keyed op with a constant (``clamp_max(x,
      c)``) is salted by its kind and constant together
      (:meth:`~mirage_xdsl.ops.OpSpec.keyed_kind`), so two bounds are two
      functions.

    The domain is an :class:`~mirage_xdsl.ops.Arith`: every element-wise op
    is its op-table formula over these pieces (``silu(x) = x / (1 +
    exp(-x))``, ``sigmoid(x) = 1 / (1 + exp(-x))``); ``neg`` is exact.
    Division by zero yields zero and is counted in ``zero_divisors``.
    ``arith`` chooses where the arrays live (:data:`NUMPY`, or a torch
    device).
    """

    name = "finite-field"

    def __init__(
        self,
        seed: int | np.random.Generator = 0,
        arith: Any = NUMPY,
        exp_keeps_q: bool = True,
        exponent_only: frozenset[Any] = frozenset(),
    ):
        rng = np.random.default_rng(seed)
        h = int(rng.integers(2, P - 1))
        self.omega = h * h % P
        if self.omega == 1:  # only h = +-1 squares to 1; excluded above
            raise AssertionError("omega must have order q")
        keys = rng.integers(0, 2**62, size=2, dtype=np.int64)
        self._sqrt_keys = (int(keys[0]), int(keys[1]))
        self.arith = arith
        self.exp_keeps_q = exp_keeps_q
        self._low = arith.array(power_table(self.omega, 1 << EXP_LOW_BITS, P))
        high_base = pow(self.omega, 1 << EXP_LOW_BITS, P)
        self._high = arith.array(power_table(high_base, (Q >> EXP_LOW_BITS) + 1, P))
        self.zero_divisors = 0
        self.exponent_only = exponent_only
        self._skip_p = False

    def begin_op(self, op: Any) -> None:
        """The interpreter is about to evaluate ``op`` (None: it is done). An
        op in ``exponent_only`` (``fingerprint_slice.exponent_only_ops``) has
        results read only as exponents: their Z_p residues are left out."""
        self._skip_p = op is not None and op in self.exponent_only

    def _p(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` on Z_p residues, or None where they are not wanted or
        an operand has none: a value without them is an exponent-only result,
        which only dead code (an op whose result nothing reads) reads mod p."""
        if self._skip_p or any(a is None for a in args):
            return None
        return fn(*args)

    # --- conversion ----------------------------------------------------------

    def _residues(self, p: Any, q: Any | None) -> Residues:
        return Residues(p, q, self.arith)

    def load(self, array: Any) -> Residues:
        if isinstance(array, Residues):
            return array
        array = np.asarray(array)
        if not np.issubdtype(array.dtype, np.integer):
            raise TypeError("finite-field values are made from integers")
        a = array.astype(np.int64)
        return self._residues(
            self.arith.array(np.mod(a, P)), self.arith.array(np.mod(a, Q))
        )

    def random(
        self, rng: np.random.Generator, shape: Sequence[int], with_q: bool = True
    ) -> Residues:
        """A uniformly random value: independent uniform residues mod p (and q)."""
        p = self.arith.array(_uniform(rng, P, shape))
        q = self.arith.array(_uniform(rng, Q, shape)) if with_q else None
        return self._residues(p, q)

    def const(self, c: float, like: Residues) -> Residues:
        """The float ``c`` as the exact rational it is, in both components,
        broadcastable against ``like``.

        A finite float is ``n / 2^k``; its image is ``n * (2^k)^-1`` mod p and
        mod q (both odd), so ``x * 0.5 * 0.25`` and ``x * 0.125`` agree exactly,
        and a constant scaling an exponent is the same rational in Z_q.
        """
        return self.load(np.full((1,) * like.ndim, field_rational(c), np.int64))

    def to_numpy(self, x: Residues) -> tuple[np.ndarray, np.ndarray | None]:
        q = None if x.q is None else self.arith.to_numpy(x.q)
        return self.arith.to_numpy(x.p), q

    # --- arithmetic ----------------------------------------------------------

    def _both(self, fn: Any, x: Residues, y: Residues) -> Residues:
        q = None if x.q is None or y.q is None else fn(x.q, y.q, Q)
        return self._residues(self._p(fn, x.p, y.p, P), q)

    def add(self, x: Residues, y: Residues) -> Residues:
        return self._both(self.arith.add, x, y)

    def mul(self, x: Residues, y: Residues) -> Residues:
        return self._both(self.arith.mul, x, y)

    def matmul(self, x: Residues, y: Residues) -> Residues:
        return self._both(self.arith.matmul, x, y)

    def neg(self, x: Residues) -> Residues:
        q = None if x.q is None else self.arith.neg(x.q, Q)
        return self._residues(self._p(self.arith.neg, x.p, P), q)

    def _inverse(self, x: Any, m: int) -> Any:
        """Fermat's ``x^(m-2)``; 0 maps to 0."""
        result, base, e = None, x, m - 2
        while e:
            if e & 1:
                result = base if result is None else self.arith.mul(result, base, m)
            e >>= 1
            if e:
                base = self.arith.mul(base, base, m)
        return result

    def div(self, x: Residues, y: Residues) -> Residues:
        if not self._skip_p:
            self.zero_divisors += self.arith.count_zero(y.p)
        if y.q is not None:
            self.zero_divisors += self.arith.count_zero(y.q)
        q = None if y.q is None else self._inverse(y.q, Q)
        return self.mul(x, self._residues(self._p(self._inverse, y.p, P), q))

    def exp(self, x: Residues) -> Residues:
        if x.q is None:
            raise AssertionError("an exp argument lacks its Z_q component")
        value = self.arith.power(self._high, self._low, x.q, P)
        q = None
        if self.exp_keeps_q:
            q = self.arith.reduce(value, Q)
        return self._residues(value, q)

    def keyed(self, kind: str, x: Residues) -> Residues:
        """The per-trial random function of ``kind``: a keyed hash of the pair
        (x_p, x_q), nonzero mod p (never a zero divisor). Each kind has its own
        keys, so ``relu(x)`` and ``tanh(x)`` are independent functions."""
        if x.q is None:
            raise AssertionError(f"a {kind} argument lacks its Z_q component")
        p_part, q_part = self.arith.to_index(x.p), self.arith.to_index(x.q)
        k_p, k_q = self._keys(kind)
        return self._residues(
            self.arith.residues_of(keyed_hash(p_part, q_part, k_p), P, True),
            self.arith.residues_of(keyed_hash(p_part, q_part, k_q), Q, False),
        )

    def _keys(self, kind: str) -> tuple[int, int]:
        """This trial's keys of a keyed kind: sqrt's keys salted by the kind."""
        salt = _salt(kind)  # a keyed op with a constant: ``clamp_max(1.0)``
        return self._sqrt_keys[0] ^ salt, self._sqrt_keys[1] ^ salt

    def sqrt(self, x: Residues) -> Residues:
        return self.keyed("sqrt", x)

    def elementwise(self, spec: OpSpec, *args: Any) -> Residues:
        """The element-wise op ``spec`` by its field formula."""
        return spec.field_apply(self, *args)

    def reduce_max(self, x: Residues, axis: int) -> Residues:
        """The row maximum as a per-trial random function of the row.

        A finite field has no order, so the maximum has no image in it. Every
        row (the residues ``(x_p, x_q)`` of its elements, in order) gets a
        keyed random value, nonzero mod p like sqrt's: equal rows meet the
        same value, so a program and its rewrite that take the maximum of the
        same row agree. What makes this useful is that safe softmax does not
        depend on the shift's value: ``exp(x - m) = exp(x) · exp(-m)`` holds
        exactly, so ``exp(x - m) / sum(exp(x - m))`` has the residues of
        ``exp(x) / sum(exp(x))`` for any ``m``; ``docs/verifier.md`` has the
        argument."""
        if x.q is None:
            raise AssertionError("a reduce_max argument lacks its Z_q component")
        p_part, q_part = self.arith.to_index(x.p), self.arith.to_index(x.q)
        k_p, k_q = self._keys("reduce_max")
        digest = row_digest(p_part, q_part, axis, k_p, self.arith)
        return self._residues(
            self.arith.residues_of(keyed_word(digest, k_p), P, True),
            self.arith.residues_of(keyed_word(digest, k_q), Q, False),
        )

    def sum(self, x: Residues, axes: tuple[int, ...]) -> Residues:
        q = None if x.q is None else self.arith.sum(x.q, axes, Q)
        return self._residues(self._p(self.arith.sum, x.p, axes, P), q)

    def div_count(self, x: Residues, count: int) -> Residues:
        inverse = self.load(np.array(pow(count, -1, P * Q)).reshape((1,) * x.ndim))
        return self.mul(x, inverse)

    # --- comparison ----------------------------------------------------------

    def equal(self, x: Residues, y: Residues) -> bool:
        """Equal residues mod p (the component every value carries)."""
        return self.arith.equal(x.p, y.p)

    def first_difference(self, x: Residues, y: Residues) -> tuple[int, ...]:
        where = np.argwhere(self.arith.to_numpy(x.p) != self.arith.to_numpy(y.p))
        return tuple(int(i) for i in where[0])
