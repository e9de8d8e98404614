"""Exact residue arithmetic on float64 arrays, in numpy: the steps of the
finite-field domain (``finite_field.py``).

Residues are float64 integers, so BLAS does the contractions and every step
is exact for a modulus below 2^26:

- the product of two residues is < 2^52, exact in float64, and
  :func:`reduce_` takes it mod m with a float64 quotient estimate that is off
  by at most one (one correction step each way);
- a matmul splits one operand into two 13-bit limbs: a limb times a residue
  is < 2^39, so a contraction of up to 2^13 terms (2^14 when the limbs are
  stacked along it) stays < 2^53; longer ones are cut into chunks;
- a sum of up to 2^27 residues stays < 2^53.

``finite_field_torch.py`` repeats these steps in torch; exact integers make
the two bit-identical. ``tests/test_finite_field.py`` checks the limits at
their extremes against Python's integers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mirage_xdsl.verify.buffer_pool import pool

LIMB_BITS = 13
LIMB = float(1 << LIMB_BITS)
MAX_CHUNK = 1 << 13
"""Longest contraction one float64 limb product sums exactly (2^13 * 2^26 * 2^13 = 2^52)."""
MAX_SUM_TERMS = 1 << 27
"""Most residues (< 2^26) a float64 sum may add exactly."""
EXP_LOW_BITS = 13
"""Exponents are split as ``e = hi * 2^13 + lo``: two table lookups and a product."""


def _out(*arrays: Any, dtype: Any = np.float64) -> np.ndarray:
    """A pooled array of the broadcast shape of ``arrays``."""
    return pool().empty(np.broadcast_shapes(*(np.shape(a) for a in arrays)), dtype)


REDUCE_CHUNK = 1 << 15
"""Elements reduced at a time: the quotient scratch stays in the CPU's cache."""


def _reduce_block(t: np.ndarray, m: int, scratch: np.ndarray, mask: np.ndarray) -> None:
    if t.ndim == 1:
        quotient, below = scratch[: t.size], mask[: t.size]
    else:
        quotient = scratch[: t.size].reshape(t.shape)
        below = mask[: t.size].reshape(t.shape)
    np.multiply(t, 1.0 / m, out=quotient)
    np.floor(quotient, out=quotient)
    quotient *= m
    t -= quotient
    np.less(t, 0.0, out=below)
    np.add(t, m, out=t, where=below)
    np.greater_equal(t, m, out=below)
    np.subtract(t, m, out=t, where=below)


def reduce_(t: np.ndarray, m: int) -> np.ndarray:
    """``t mod m`` in place, for float64 integers ``0 <= t < 2^53``.

    ``t * (1/m)`` is within 2^-25 of the true quotient (< 2^28), so its floor
    is off by at most one; ``floor * m`` and the difference are exact, and one
    correction step each way lands in [0, m). A large array is reduced a cache
    sized block at a time, which halves the memory traffic.
    """
    flat = t.reshape(-1) if t.flags.c_contiguous else None
    if flat is None or t.size <= REDUCE_CHUNK:
        _reduce_block(t, m, np.empty(t.size), np.empty(t.size, bool))
        return t
    scratch, mask = np.empty(REDUCE_CHUNK), np.empty(REDUCE_CHUNK, bool)
    for start in _blocks(flat.size):
        _reduce_block(flat[start : start + REDUCE_CHUNK], m, scratch, mask)
    return t


def reduce(x: np.ndarray, m: int) -> np.ndarray:
    """``x mod m`` for integers ``0 <= x < 2^53``, as a new float64 array."""
    return reduce_(np.array(x, np.float64), m)


def _flat(x: Any, shape: tuple[int, ...]) -> np.ndarray | float | None:
    """``x`` as a flat array of ``shape``'s elements, a scalar, or None (it
    broadcasts otherwise, or is not contiguous)."""
    if np.size(x) == 1:
        return float(np.reshape(x, -1)[0])
    if np.shape(x) == shape and x.flags.c_contiguous:
        return x.reshape(-1)
    return None


def _blocks(n: int) -> range:
    return range(0, n, REDUCE_CHUNK)


def mulmod(a: np.ndarray, b: np.ndarray | float, m: int) -> np.ndarray:
    """``a * b mod m`` for residues in [0, m), m < 2^26: the product is exact.

    Large operands of one shape are multiplied and reduced a cache-sized
    block at a time: the product never makes a round trip through memory.
    """
    out = _out(a, b)
    fa, fb = _flat(a, out.shape), _flat(b, out.shape)
    if out.size <= REDUCE_CHUNK or fa is None or fb is None or isinstance(fa, float):
        return reduce_(np.multiply(a, b, out=out), m)
    flat = out.reshape(-1)
    scratch, mask = np.empty(REDUCE_CHUNK), np.empty(REDUCE_CHUNK, bool)
    for s in _blocks(flat.size):
        block = flat[s : s + REDUCE_CHUNK]
        np.multiply(
            fa[s : s + REDUCE_CHUNK],
            fb if isinstance(fb, float) else fb[s : s + REDUCE_CHUNK],
            out=block,
        )
        _reduce_block(block, m, scratch, mask)
    return out


def _memory_order(x: np.ndarray) -> tuple[np.ndarray, Any]:
    """``x`` with its axes in memory order (a contiguous view when ``x`` is a
    transposed one, else a copy), and how to put a result back in ``x``'s."""
    if x.flags.c_contiguous:
        return x, lambda y: y
    perm = sorted(range(x.ndim), key=lambda i: -x.strides[i])
    y = x.transpose(perm)
    if not y.flags.c_contiguous:
        return np.ascontiguousarray(x), lambda y: y
    inverse = [perm.index(i) for i in range(x.ndim)]
    return y, lambda r: r.transpose(inverse)


def power(high: np.ndarray, low: np.ndarray, e: np.ndarray, m: int) -> np.ndarray:
    """``high[e >> 13] * low[e & 8191] mod m`` for exponents ``e`` in Z_q.

    The tables hold ``w^(hi * 2^13)`` and ``w^lo`` for every ``hi`` and ``lo``
    a residue below q can have (so the lookups never clip), and the result is
    ``w^e``. It runs
    a cache-sized block at a time (index, two lookups, product, reduction),
    reading ``e`` once and writing the result once.
    """
    x, undo = _memory_order(np.asarray(e, np.float64))
    out = pool().empty(x.shape)
    fx, fo = x.reshape(-1), out.reshape(-1)
    hi, lo = np.empty(REDUCE_CHUNK, np.int32), np.empty(REDUCE_CHUNK, np.int32)
    h, w = np.empty(REDUCE_CHUNK), np.empty(REDUCE_CHUNK)
    scratch, mask = np.empty(REDUCE_CHUNK), np.empty(REDUCE_CHUNK, bool)
    for s in _blocks(fx.size):
        block = fo[s : s + REDUCE_CHUNK]
        k = block.size
        np.copyto(hi[:k], fx[s : s + k], casting="unsafe")
        np.bitwise_and(hi[:k], (1 << EXP_LOW_BITS) - 1, out=lo[:k])
        np.right_shift(hi[:k], EXP_LOW_BITS, out=hi[:k])
        np.take(high, hi[:k], mode="clip", out=h[:k])
        np.take(low, lo[:k], mode="clip", out=w[:k])
        np.multiply(h[:k], w[:k], out=block)
        _reduce_block(block, m, scratch, mask)
    return undo(out)


def addmod(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    s = np.add(a, b, out=_out(a, b))
    np.subtract(s, m, out=s, where=s >= m)
    return s


def negmod(a: np.ndarray, m: int) -> np.ndarray:
    r = np.subtract(m, a, out=_out(a))
    r[r == m] = 0.0
    return r


def _limbs(
    x: np.ndarray, hi: np.ndarray | None = None, lo: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``x = hi * 2^13 + lo`` with both limbs < 2^13 (exact float64 steps),
    written into ``hi`` and ``lo`` when given."""
    hi = np.multiply(x, 1.0 / LIMB, out=_out(x) if hi is None else hi)
    np.floor(hi, out=hi)
    lo = np.multiply(hi, LIMB, out=_out(x) if lo is None else lo)
    np.subtract(x, lo, out=lo)
    return hi, lo


def _split_matmul(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    """``a @ b mod m`` as two products, for outputs smaller than the operands.

    The smaller operand is split as ``hi * 2^13 + lo``, so ``a @ b = (hi @ b)
    * 2^13 + lo @ b``: each product sums terms < 2^39, and ``reduce(hi @ b) *
    2^13 + lo @ b < 2^39 + 2^52`` is still exact.
    """
    split_left = a.size <= b.size
    small, other = (a, b) if split_left else (b, a)
    hi, lo = _limbs(small)
    other = _blas_ready(other)

    def product(limb: np.ndarray) -> np.ndarray:
        left, right = (limb, other) if split_left else (other, limb)
        return np.matmul(left, right, out=_product_out(left, right))

    r = reduce_(product(hi), m)
    r *= LIMB
    r += product(lo)
    return reduce_(r, m)


def _stacked_matmul(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    """``a @ b mod m`` as one product, for outputs larger than the operands.

    With the larger operand split as ``hi * 2^13 + lo`` and the smaller one
    scaled by 2^13 mod m, ``a @ b = [a', a] @ [hi; lo]`` (or the mirror
    image): one BLAS call over a contraction twice as long, of terms < 2^39,
    so up to 2^14 of them sum exactly, and a single reduction of the output.
    """
    left_scaled = a.size <= b.size
    scaled, split = (a, b) if left_scaled else (b, a)
    # The contraction axis of each side: last of the left, next to last of the right.
    axis, split_axis = (-1, -2) if left_scaled else (-2, -1)
    k = scaled.shape[axis]
    # Both stacked operands are written in place: [scaled * 2^13 mod m, scaled]
    # and [hi; lo], each along the contraction.
    stacked = _doubled(scaled, axis)
    limbs = _doubled(split, split_axis)
    first, second = _halves(stacked, axis, k)
    np.multiply(scaled, LIMB, out=first)
    reduce_(first, m)
    np.copyto(second, scaled)
    _limbs(split, *_halves(limbs, split_axis, k))
    left, right = (stacked, limbs) if left_scaled else (limbs, stacked)
    return reduce_(np.matmul(left, right, out=_product_out(left, right)), m)


def _doubled(x: np.ndarray, axis: int) -> np.ndarray:
    shape = list(x.shape)
    shape[axis] *= 2
    return pool().empty(shape)


def _halves(x: np.ndarray, axis: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    index = [slice(None)] * x.ndim
    index[axis] = slice(0, k)
    first = x[tuple(index)]
    index[axis] = slice(k, 2 * k)
    return first, x[tuple(index)]


def _product_out(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return pool().empty((*batch, a.shape[-2], b.shape[-1]))


def stacks(a_shape: Sequence[int], b_shape: Sequence[int]) -> bool:
    """Whether ``a @ b`` takes one stacked product (its output is larger than
    both operands together) rather than two products of the smaller one."""
    batch = np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
    out = math.prod(batch) * a_shape[-2] * b_shape[-1]
    return out > math.prod(a_shape) + math.prod(b_shape)


def in_chunks(a: Any, b: Any, m: int, limb_matmul: Any, add: Any) -> Any:
    """``a @ b mod m`` for any contraction length: ``limb_matmul`` on chunks
    of at most MAX_CHUNK terms, the partial results added mod m."""
    result = None
    for start in range(0, a.shape[-1], MAX_CHUNK):
        part = limb_matmul(
            a[..., start : start + MAX_CHUNK], b[..., start : start + MAX_CHUNK, :], m
        )
        result = part if result is None else add(result, part, m)
    assert result is not None
    return result


def check_sum_terms(shape: Sequence[int], axes: tuple[int, ...]) -> None:
    count = math.prod(shape[a] for a in axes)
    if count > MAX_SUM_TERMS:
        raise ValueError(f"a sum of {count} terms would not be exact in float64")


def _limb_matmul(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    """``a @ b mod m`` for a contraction of at most MAX_CHUNK terms."""
    if stacks(a.shape, b.shape):
        return _stacked_matmul(a, b, m)
    return _split_matmul(a, b, m)


def _compact(x: np.ndarray) -> np.ndarray:
    """Drop broadcast (zero-stride) batch axes to size 1: matmul re-broadcasts them."""
    index = tuple(
        slice(0, 1) if stride == 0 and size > 1 and axis < x.ndim - 2 else slice(None)
        for axis, (stride, size) in enumerate(zip(x.strides, x.shape, strict=True))
    )
    return x[index]


def _blas_ready(x: np.ndarray) -> np.ndarray:
    """``x`` with C-contiguous matrices (BLAS's layout); batch strides may stay."""
    item = x.itemsize
    if (
        x.dtype == np.float64
        and x.strides[-1] == item
        and (x.shape[-2] <= 1 or x.strides[-2] == x.shape[-1] * item)
    ):
        return x
    return np.ascontiguousarray(x, np.float64)


def _fold_broadcasts(
    a: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, np.ndarray, Any]:
    """Fewer, larger matrices for a batched matmul with broadcast batch axes.

    A batch axis along which ``b`` is broadcast (size 1) while ``a`` varies
    joins ``a``'s rows; one along which ``a`` is broadcast joins ``b``'s
    columns. A block graph's loop-invariant tile against its for-loop tiles
    becomes one wide product instead of many small ones (about twice as fast
    for attention's scores). Returns the two operands and the function that
    views the product in batch order again (a transposed view, not a copy).
    """
    n = max(a.ndim, b.ndim)
    a = a.reshape((1,) * (n - a.ndim) + a.shape)
    b = b.reshape((1,) * (n - b.ndim) + b.shape)
    batch = range(n - 2)
    rows = [i for i in batch if b.shape[i] == 1 and a.shape[i] > 1]
    cols = [i for i in batch if a.shape[i] == 1 and b.shape[i] > 1]
    if not rows and not cols:
        return a, b, lambda out: out
    rest = [i for i in batch if i not in rows and i not in cols]
    m_rows, k, n_cols = a.shape[-2], a.shape[-1], b.shape[-1]
    row_sizes = [a.shape[i] for i in rows]
    col_sizes = [b.shape[i] for i in cols]
    folded_a = a.transpose([*rest, *rows, n - 2, n - 1, *cols])
    folded_a = folded_a.reshape(
        *(a.shape[i] for i in rest), math.prod(row_sizes) * m_rows, k
    )
    folded_b = b.transpose([*rest, *rows, n - 2, *cols, n - 1])
    folded_b = folded_b.reshape(
        *(b.shape[i] for i in rest), k, math.prod(col_sizes) * n_cols
    )
    rest_sizes = [max(a.shape[i], b.shape[i]) for i in rest]
    order = [*rest, *rows, n - 2, *cols, n - 1]  # the product's axes
    inverse = [order.index(i) for i in range(n)]

    def restore(out: np.ndarray) -> np.ndarray:
        full = out.reshape(*rest_sizes, *row_sizes, m_rows, *col_sizes, n_cols)
        return full.transpose(inverse)

    return folded_a, folded_b, restore


def matmod(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    """Batched ``a @ b mod m`` (last two axes), exact for any contraction length."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a, b = _compact(a), _compact(b)
    a, b, restore = _fold_broadcasts(a, b)
    out = restore(_matmod(a, b, m))
    # a batch axis both operands broadcast was compacted in both: so is the
    # product, which is the same along it
    return np.broadcast_to(out, (*batch, *out.shape[-2:]))


def _matmod(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    return in_chunks(a, b, m, _limb_matmul, addmod)


def summod(x: np.ndarray, axes: tuple[int, ...], m: int) -> np.ndarray:
    check_sum_terms(x.shape, axes)
    return reduce_(np.sum(x, axis=axes, keepdims=True, dtype=np.float64), m)


class NumpyArithmetic:
    """The domain's array steps in numpy, on the CPU."""

    name = "numpy"

    @staticmethod
    def array(values: np.ndarray) -> np.ndarray:
        return np.asarray(values, np.float64)

    @staticmethod
    def to_numpy(x: np.ndarray) -> np.ndarray:
        return np.asarray(x)

    reduce = staticmethod(reduce)
    mul = staticmethod(mulmod)
    add = staticmethod(addmod)
    neg = staticmethod(negmod)
    matmul = staticmethod(matmod)
    sum = staticmethod(summod)

    @staticmethod
    def to_index(x: np.ndarray) -> np.ndarray:
        return x.astype(np.int64)

    power = staticmethod(power)

    @staticmethod
    def positions(shape: Sequence[int], axis: int) -> np.ndarray:
        """Each element's index along ``axis``, as int64 of ``shape``'s rank."""
        view = [1] * len(shape)
        view[axis] = shape[axis]
        return np.arange(shape[axis], dtype=np.int64).reshape(view)

    @staticmethod
    def index_sum(words: np.ndarray, axis: int) -> np.ndarray:
        """Wrapping int64 sum over ``axis``, kept with size 1."""
        return np.sum(words, axis=axis, keepdims=True, dtype=np.int64)

    @staticmethod
    def residues_of(hashed: np.ndarray, m: int, nonzero: bool) -> np.ndarray:
        r = hashed % (m - 1) + 1 if nonzero else hashed % m
        return r.astype(np.float64)

    @staticmethod
    def count_zero(x: np.ndarray) -> int:
        return int(np.count_nonzero(x == 0))

    @staticmethod
    def equal(x: np.ndarray, y: np.ndarray) -> bool:
        return bool(np.array_equal(x, y))

    @staticmethod
    def permute(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
        return x.transpose(axes)

    @staticmethod
    def broadcast(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
        return np.broadcast_to(x, shape)

    @staticmethod
    def cat(xs: Sequence[np.ndarray], axis: int) -> np.ndarray:
        return np.concatenate(xs, axis=axis)


NUMPY = NumpyArithmetic()
