"""Numeric fingerprints of tensors, computed while the generator builds them.

As in the original Mirage, every tensor the generator creates is also
evaluated on one fixed set of random inputs, so two ways of computing the
same values are recognised at once and merged into one *class*: the
generator then builds each distinct tensor once instead of once per graph
that contains it. Values follow the interpreter's partition semantics (a
block-level value is an array ``(grid_x, grid_y, grid_z, iterations, *tile)``)
in float64, so fingerprints are stable under reassociation; equality is
decided on values rounded to a few significant digits. Fingerprints only
merge and match candidates; every result is still checked by the verifier.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from mirage_xdsl.ops import OPS, Form
from mirage_xdsl.semantics.domain import FloatDomain
from mirage_xdsl.semantics.interpreter import (
    ITERATION_AXIS,
    _broadcast_except,
    shift_weights,
)

FLOAT64 = FloatDomain(np.float64)
"""The reference's arithmetic in float64, for stable fingerprints."""

DIGITS = 6


def _rms(
    x: np.ndarray, axes: tuple[int, ...], count: int, eps: float = 0.0
) -> np.ndarray:
    return np.sqrt(np.sum(x * x, axis=axes, keepdims=True) / count + eps)


def evaluate(
    kind: str, args: Sequence[np.ndarray], attrs: dict, forloop: int = 1
) -> np.ndarray:
    """One op on (block-batched) float64 arrays; tiles are the trailing axes.
    An element-wise op is its op-table entry's ``real`` (a constant from
    ``attrs["scalar"]``)."""
    x = args[0]
    spec = OPS[kind]
    with np.errstate(all="ignore"):
        if spec.elementwise:
            assert spec.real is not None, kind
            if spec.form is Form.SCALAR:
                return spec.real(x, attrs["scalar"])
            return spec.real(*args)
        match kind:
            case "matmul":
                return np.matmul(x, args[1])
            case "rms_norm":
                return x / _rms(x, (-1,), x.shape[-1], attrs.get("eps", 0.0))
            case "reduce_sum":
                return np.sum(x, axis=attrs["dim"] - attrs["rank"], keepdims=True)
            case "reduce_max":
                return np.max(x, axis=attrs["dim"] - attrs["rank"], keepdims=True)
            case "concat":
                d = attrs["dim"] - attrs["rank"]
                return np.concatenate(_broadcast_except(x, args[1], d), axis=d)
            case "forloop_accum":
                if len(args) > 1:  # the online softmax's weights
                    x = x * shift_weights(FLOAT64, args[1])
                count = x.shape[-1] * x.shape[ITERATION_AXIS]
                r = attrs["reduction"]
                if r == "none":
                    return np.sum(x, axis=ITERATION_AXIS, keepdims=True)
                if r == "rms":
                    return _rms(x, (ITERATION_AXIS, -1), count)
                s = np.sum(x, axis=(ITERATION_AXIS, -1), keepdims=True)
                return s / count if r == "mean" else s
    raise NotImplementedError(kind)


def valid(value: np.ndarray) -> bool:
    """NaN or inf means the op left its domain (sqrt of a negative, ...)."""
    return bool(np.isfinite(value).all())


CHUNK = 4096
"""Elements folded into each group of projection words."""
PROJECTIONS = (
    np.random.default_rng(0x6D69726167)
    .integers(0, 1 << 20, (CHUNK, 4))
    .astype(np.float64)
)
"""Four random integer weights below 2^20 per position of a chunk, as floats."""


def fingerprint(value: np.ndarray) -> bytes:
    """A hash of the shape and the values to ``DIGITS`` digits of their scale.

    The rounded values are integers of at most 2^20 in magnitude, so their
    dot products with the weights, chunk by chunk, are exact in float64 (a
    sum of 4096 products under 2^40 stays under 2^53) whatever order BLAS
    adds them in; four such words per chunk are hashed instead of every
    value, a few times faster on the large block values. Two rounded arrays
    that differ get the same words with probability at most ``2^-80`` per
    chunk (one differing position fixes its weight for each word).
    """
    v = np.asarray(value, np.float64)
    scale = float(np.max(np.abs(v))) if v.size else 0.0
    if scale > 0:
        v = np.rint(v * (10.0**DIGITS / scale))
    flat = v.ravel()
    whole, rest = divmod(flat.size, CHUNK)
    h = hashlib.blake2b(digest_size=16)
    h.update(str(v.shape).encode())
    h.update(np.format_float_positional(scale, precision=4, fractional=False).encode())
    h.update((flat[: whole * CHUNK].reshape(whole, CHUNK) @ PROJECTIONS).tobytes())
    h.update((flat[whole * CHUNK :] @ PROJECTIONS[:rest]).tobytes())
    return h.digest()


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two full tensors agree (relative L2, as ``mirage-run``)."""
    if a.shape != b.shape:
        return False
    scale = max(float(np.linalg.norm(b)), 1e-30)
    return float(np.linalg.norm(a - b)) / scale < 1e-6
