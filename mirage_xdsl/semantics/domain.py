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

from typing import Protocol

import numpy as np


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

    def matmul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Matmul over the last two axes, broadcasting leading axes."""
        ...

    def sum(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        """Sum over ``axes``, keeping them with size 1."""
        ...

    def div_count(self, x: np.ndarray, count: int) -> np.ndarray:
        """Divide by a positive element count (for means)."""
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

    def matmul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.matmul(x, y)

    def sum(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return np.sum(x, axis=axes, keepdims=True, dtype=self.dtype)

    def div_count(self, x: np.ndarray, count: int) -> np.ndarray:
        return x / self.dtype(count)
