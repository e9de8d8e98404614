"""Value domains the interpreter computes in.

The interpreter walks a µGraph once and asks a domain for every arithmetic
step, so one walker serves both the float reference (this module) and the
finite-field fingerprints of the verifier (``finite_field.py``). A domain value
is a numpy array, or an array-like (``finite_field.Residues``), whose shape is
the tensor's logical shape; the walker reshapes, transposes, broadcasts
(``np.broadcast_to``) and concatenates (``np.concatenate``) those values itself
to implement block partitioning, and leaves everything that depends on the
number system to the domain.

A domain supplies the few primitives the walker's structural ops (matmul,
reductions, RMSNorm, the for-loop accumulator) are built from, and one entry,
:meth:`Domain.elementwise`, for every element-wise op: it computes the op from
its entry in the op table (``mirage_xdsl.ops``).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from mirage_xdsl.ops import Form, OpSpec

# The GELU helpers live with the op table; re-exported for the lowering and
# fuzz modules that import them from here.
from mirage_xdsl.ops.table import (  # noqa: F401
    GELU_TANH_CUBIC,
    GELU_TANH_SCALE,
    erf,
    gelu_erf,
    gelu_tanh,
)


class Domain(Protocol):
    """The arithmetic a value domain must provide."""

    name: str

    def load(self, array: np.ndarray) -> np.ndarray:
        """Turn a user input into a domain value."""
        ...

    def const(self, c: float, like: np.ndarray) -> Any:
        """The finite float ``c``, broadcastable against ``like``."""
        ...

    def add(self, x: np.ndarray, y: np.ndarray) -> np.ndarray: ...

    def mul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray: ...

    def div(self, x: np.ndarray, y: np.ndarray) -> np.ndarray: ...

    def neg(self, x: np.ndarray) -> np.ndarray: ...

    def exp(self, x: np.ndarray) -> np.ndarray: ...

    def sqrt(self, x: np.ndarray) -> np.ndarray: ...

    def elementwise(self, spec: OpSpec, *args: Any) -> np.ndarray:
        """The element-wise op ``spec`` on its operands (then its constant,
        for a :attr:`~mirage_xdsl.ops.Form.SCALAR` op)."""
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

    def const(self, c: float, like: np.ndarray) -> Any:
        return self.dtype(c)

    def add(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return x + y

    def mul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return x * y

    def div(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return x / y

    def neg(self, x: np.ndarray) -> np.ndarray:
        return -x

    def exp(self, x: np.ndarray) -> np.ndarray:
        return np.exp(x)

    def sqrt(self, x: np.ndarray) -> np.ndarray:
        return np.sqrt(x)

    def elementwise(self, spec: OpSpec, *args: Any) -> np.ndarray:
        """``spec.real``; a constant is taken in the domain's float type.
        Infinities and NaNs come out as torch gives them (``log(0)`` is
        ``-inf``), without numpy's warnings."""
        assert spec.real is not None, spec.kind
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            if spec.form is Form.SCALAR:
                x, c = args
                return spec.real(x, self.dtype(c))
            return spec.real(*args)

    def matmul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.matmul(x, y)

    def sum(self, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return np.sum(x, axis=axes, keepdims=True, dtype=self.dtype)

    def div_count(self, x: np.ndarray, count: int) -> np.ndarray:
        return x / self.dtype(count)

    def reduce_max(self, x: np.ndarray, axis: int) -> np.ndarray:
        return np.max(x, axis=axis, keepdims=True)
