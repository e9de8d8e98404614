"""Checking what a caller passes against a program's buffers.

Two kinds of array are accepted: torch CUDA tensors, used in place through
``data_ptr()`` (so they must already be contiguous, of the right dtype and on
the right device), and numpy arrays, copied to and from the device. The checks
name the argument and the mismatch in one line. torch is never imported here:
a tensor is recognised by its type's module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.lowering.program import BufferSpec


@dataclass(frozen=True)
class ElementType:
    """How one buffer dtype appears to numpy, torch and a fill pattern."""

    name: str
    bytes: int
    torch_name: str
    nan_pattern: int
    """Bit pattern of a quiet NaN, for poisoning buffers before a run."""

    def numpy_dtype(self) -> np.dtype:
        if self.name == "bf16":
            try:
                import ml_dtypes  # type: ignore[import-not-found]
            except ImportError:
                raise MirageError(
                    "error: bf16 numpy arrays need the ml_dtypes package; "
                    "pass torch tensors instead"
                ) from None
            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype({"f16": np.float16, "f32": np.float32}[self.name])

    def torch_dtype(self) -> Any:
        import torch

        return getattr(torch, self.torch_name)


ELEMENT_TYPES: dict[str, ElementType] = {
    e.name: e
    for e in (
        ElementType("f16", 2, "float16", 0x7E00),
        ElementType("bf16", 2, "bfloat16", 0x7FC0),
        ElementType("f32", 4, "float32", 0x7FC00000),
    )
}

ALIGNMENT = 16
"""Generated kernels may use 16-byte vector accesses on any buffer."""


def element_type(spec: BufferSpec) -> ElementType:
    try:
        return ELEMENT_TYPES[spec.dtype]
    except KeyError:
        raise MirageError(
            f"error: buffer '{spec.name}' has unsupported dtype '{spec.dtype}'"
        ) from None


def nbytes(spec: BufferSpec) -> int:
    return int(np.prod(spec.shape, dtype=np.int64)) * element_type(spec).bytes


def is_torch_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def array_kind(args: Sequence[Any], function: str) -> str:
    """``"torch"`` or ``"numpy"``; mixing the two is an error."""
    kinds = set()
    for i, x in enumerate(args):
        if is_torch_tensor(x):
            kinds.add("torch")
        elif isinstance(x, np.ndarray):
            kinds.add("numpy")
        else:
            raise MirageError(
                f"error: argument {i} of '{function}' is a {type(x).__name__}; "
                "expected a torch tensor or a numpy array"
            )
    if len(kinds) > 1:
        raise MirageError(
            f"error: arguments of '{function}' mix torch tensors and numpy arrays"
        )
    return kinds.pop() if kinds else "numpy"


def check_count(args: Sequence[Any], specs: Sequence[BufferSpec], what: str) -> None:
    if len(args) != len(specs):
        raise MirageError(f"error: {what} takes {len(specs)} arrays, got {len(args)}")


def _label(role: str, i: int, spec: BufferSpec, function: str) -> str:
    return f"{role} {i} ('{spec.name}') of '{function}'"


def _check_shape(shape: Sequence[int], spec: BufferSpec, label: str) -> None:
    if tuple(shape) != tuple(spec.shape):
        raise MirageError(
            f"error: {label}: expected shape {list(spec.shape)}, got {list(shape)}"
        )


def check_torch(
    x: Any, spec: BufferSpec, role: str, i: int, function: str, device: int
) -> int:
    """Validate a tensor for ``spec`` and return its device pointer."""
    label = _label(role, i, spec, function)
    if x.device.type != "cuda":
        raise MirageError(f"error: {label}: tensor is on '{x.device}', not on a GPU")
    index = x.device.index if x.device.index is not None else 0
    if index != device:
        raise MirageError(
            f"error: {label}: tensor is on cuda:{index}, program runs on cuda:{device}"
        )
    want = element_type(spec)
    if str(x.dtype) != f"torch.{want.torch_name}":
        raise MirageError(
            f"error: {label}: expected dtype {want.torch_name}, got {x.dtype}"
        )
    _check_shape(x.shape, spec, label)
    if not x.is_contiguous():
        raise MirageError(f"error: {label}: tensor is not contiguous")
    ptr = int(x.data_ptr())
    if ptr % ALIGNMENT:
        raise MirageError(f"error: {label}: data is not {ALIGNMENT}-byte aligned")
    return ptr


def check_numpy(
    x: np.ndarray, spec: BufferSpec, role: str, i: int, function: str
) -> np.ndarray:
    """Validate an array for ``spec``; return it C-contiguous."""
    label = _label(role, i, spec, function)
    want = element_type(spec).numpy_dtype()
    if x.dtype != want:
        raise MirageError(f"error: {label}: expected dtype {want}, got {x.dtype}")
    _check_shape(x.shape, spec, label)
    return np.ascontiguousarray(x)
