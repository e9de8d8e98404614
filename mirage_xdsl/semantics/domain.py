"""Value domains the interpreter computes in.

The interpreter walks a µGraph once and asks a domain for every arithmetic
step, so one walker serves both the float reference (this module) and the
finite-field fingerprints of the verifier (``finite_field.py``). A domain value
is a numpy array, or an array-like (``finite_field.Residues``), whose shape is
the tensor's logical shape; the walker reshapes, transposes, broadcasts
(``np.broadcast_to``) and concatenates (``np.concatenate``) those values itself
to implement block partitioning, and leaves everything that depends on the
number system to the domain.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

GELU_TANH_SCALE = math.sqrt(2.0 / math.pi)
"""sqrt(2/pi), the scale inside the tanh approximation of GELU."""
GELU_TANH_CUBIC = 0.044715
"""The cubic coefficient of the tanh approximation of GELU."""

_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x: np.ndarray) -> np.ndarray:
    """The error function element-wise, in ``x``'s float type.

    numpy has no erf and scipy is not a dependency; ``math.erf`` is exact to
    double precision, which the fp32 reference rounds.
    """
    x = np.asarray(x)
    return _erf(x).astype(x.dtype if x.dtype.kind == "f" else np.float64)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1 + np.tanh(GELU_TANH_SCALE * (x + GELU_TANH_CUBIC * x * x * x)))


def gelu_erf(x: np.ndarray) -> np.ndarray:
    """Exact GELU: 0.5 x (1 + erf(x / sqrt 2))."""
    return 0.5 * x * (1 + erf(x / np.sqrt(x.dtype.type(2.0))))


class Domain(Protocol):
    """The arithmetic a value domain must provide."""

    name: str

    def load(self, array: np.ndarray) -> np.ndarray:
        """Turn a user input into a domain value."""
        ...

    def add(self, x: np.ndarray, y: np.ndarray) -> np.ndarray: ...

    def mul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray: ...

    def div(self, x: np.ndarray, y: np.ndarray) -> np.ndarray: ...

    def exp(self, x: np.ndarray) -> np.ndarray: ...

    def silu(self, x: np.ndarray) -> np.ndarray: ...

    def sqrt(self, x: np.ndarray) -> np.ndarray: ...

    def square(self, x: np.ndarray) -> np.ndarray: ...

    def mul_scalar(self, x: np.ndarray, c: float) -> np.ndarray:
        """``x * c`` for a finite float constant."""
        ...

    def add_scalar(self, x: np.ndarray, c: float) -> np.ndarray:
        """``x + c`` for a finite float constant."""
        ...

    def neg(self, x: np.ndarray) -> np.ndarray: ...

    def relu(self, x: np.ndarray) -> np.ndarray: ...

    def sigmoid(self, x: np.ndarray) -> np.ndarray: ...

    def tanh(self, x: np.ndarray) -> np.ndarray: ...

    def gelu(self, x: np.ndarray) -> np.ndarray: ...

    def gelu_erf(self, x: np.ndarray) -> np.ndarray: ...

    def matmul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Matmul over the last two axes, broadcasting leading axes."""
        ...

    def sum(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        """Sum over ``axes``, keeping them with size 1."""
        ...

    def div_count(self, x: np.ndarray, count: int) -> np.ndarray:
        """Divide by a positive element count (for means)."""
        ...

    def reduce_max(self, x: np.ndarray, axis: int) -> np.ndarray:
        """Maximum over one (negative) axis, kept with size 1."""
        ...


class FloatDomain:
    """Real arithmetic in numpy with fp32 accumulation: the correctness reference."""

    name = "float"

    def __init__(self, dtype: type = np.float32):
        self.dtype = dtype

    def load(self, array: np.ndarray) -> np.ndarray:
        return np.asarray(array, dtype=self.dtype)

    def add(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return x + y

    def mul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return x * y

    def div(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return x / y

    def exp(self, x: np.ndarray) -> np.ndarray:
        return np.exp(x)

    def silu(self, x: np.ndarray) -> np.ndarray:
        return x / (1 + np.exp(-x))

    def sqrt(self, x: np.ndarray) -> np.ndarray:
        return np.sqrt(x)

    def square(self, x: np.ndarray) -> np.ndarray:
        return x * x

    def mul_scalar(self, x: np.ndarray, c: float) -> np.ndarray:
        return x * self.dtype(c)

    def add_scalar(self, x: np.ndarray, c: float) -> np.ndarray:
        return x + self.dtype(c)

    def neg(self, x: np.ndarray) -> np.ndarray:
        return -x

    def relu(self, x: np.ndarray) -> np.ndarray:
        return np.maximum(x, x.dtype.type(0))

    def sigmoid(self, x: np.ndarray) -> np.ndarray:
        return 1 / (1 + np.exp(-x))

    def tanh(self, x: np.ndarray) -> np.ndarray:
        return np.tanh(x)

    def gelu(self, x: np.ndarray) -> np.ndarray:
        return gelu_tanh(x)

    def gelu_erf(self, x: np.ndarray) -> np.ndarray:
        return gelu_erf(x)

    def matmul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.matmul(x, y)

    def sum(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return np.sum(x, axis=axes, keepdims=True, dtype=self.dtype)

    def div_count(self, x: np.ndarray, count: int) -> np.ndarray:
        return x / self.dtype(count)

    def reduce_max(self, x: np.ndarray, axis: int) -> np.ndarray:
        return np.max(x, axis=axis, keepdims=True)
