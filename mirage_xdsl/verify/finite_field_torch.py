"""The finite-field domain's array steps in torch: on a GPU, or on the CPU.

:class:`TorchArithmetic` is a drop-in for ``residue_arith.NUMPY``: the same
float64 integer steps (products below 2^52, 13-bit limbs for contractions of
up to 2^13 terms, sums of up to 2^27 residues), with ``fmod`` for reductions.
Every intermediate is an exact integer, so the order in which cuBLAS or a CUDA
reduction adds terms cannot change a result, and the residues are
bit-identical to numpy's on the same seed (``tests/test_finite_field.py``).
The random inputs and the trial's keys are drawn by numpy in both cases.

torch is optional: importing this module does not import it.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mirage_xdsl.verify.residue_arith import (
    EXP_LOW_BITS,
    LIMB,
    check_sum_terms,
    in_chunks,
    stacks,
)

_MAIN_PID = os.getpid()
"""The process that imported this module; forked workers differ from it."""


class TorchArithmetic:
    """Float64 residue arithmetic on one torch device."""

    def __init__(self, device: str = "cpu"):
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.name = f"torch-{self.device.type}"

    def array(self, values: np.ndarray) -> Any:
        host = self.torch.from_numpy(np.ascontiguousarray(values, np.float64))
        return host.to(self.device)

    def to_numpy(self, x: Any) -> np.ndarray:
        return x.cpu().numpy()

    def reduce(self, x: Any, m: int) -> Any:
        return self.torch.fmod(x, m)

    def mul(self, a: Any, b: Any, m: int) -> Any:
        return (a * b).fmod_(m)

    def add(self, a: Any, b: Any, m: int) -> Any:
        s = a + b
        return s.sub_((s >= m).to(s.dtype).mul_(m))

    def neg(self, a: Any, m: int) -> Any:
        r = m - a
        return r.masked_fill_(r == m, 0.0)

    def _limbs(self, x: Any) -> tuple[Any, Any]:
        hi = self.torch.floor(x * (1.0 / LIMB))
        return hi, x - hi * LIMB

    def _limb_matmul(self, a: Any, b: Any, m: int) -> Any:
        """As ``residue_arith._limb_matmul``: one stacked product when the
        output is the larger side, else two products of the smaller operand's
        limbs."""
        torch = self.torch
        if stacks(a.shape, b.shape):
            if a.numel() <= b.numel():
                hi, lo = self._limbs(b)
                left = torch.cat(torch.broadcast_tensors(self.mul(a, LIMB, m), a), -1)
                right = torch.cat([hi, lo], -2)
            else:
                hi, lo = self._limbs(a)
                left = torch.cat([hi, lo], -1)
                right = torch.cat(torch.broadcast_tensors(self.mul(b, LIMB, m), b), -2)
            return torch.matmul(left, right).fmod_(m)
        split_left = a.numel() <= b.numel()
        hi, lo = self._limbs(a if split_left else b)

        def product(limb: Any) -> Any:
            return torch.matmul(limb, b) if split_left else torch.matmul(a, limb)

        r = product(hi).fmod_(m).mul_(LIMB)
        return r.add_(product(lo)).fmod_(m)

    def matmul(self, a: Any, b: Any, m: int) -> Any:
        return in_chunks(a, b, m, self._limb_matmul, self.add)

    def sum(self, x: Any, axes: tuple[int, ...], m: int) -> Any:
        check_sum_terms(x.shape, axes)
        return self.torch.sum(x, dim=axes, keepdim=True).fmod_(m)

    def to_index(self, x: Any) -> Any:
        return x.to(self.torch.int64)

    def power(self, high: Any, low: Any, e: Any, m: int) -> Any:
        index = e.to(self.torch.int64)
        mask = (1 << EXP_LOW_BITS) - 1
        return self.mul(high[index >> EXP_LOW_BITS], low[index & mask], m)

    def positions(self, shape: Sequence[int], axis: int) -> Any:
        view = [1] * len(shape)
        view[axis] = shape[axis]
        index = self.torch.arange(shape[axis], dtype=self.torch.int64)
        return index.to(self.device).reshape(view)

    def index_sum(self, words: Any, axis: int) -> Any:
        return self.torch.sum(words, dim=axis, keepdim=True)

    def residues_of(self, hashed: Any, m: int, nonzero: bool) -> Any:
        r = hashed % (m - 1) + 1 if nonzero else hashed % m
        return r.to(self.torch.float64)

    def count_zero(self, x: Any) -> int:
        return int((x == 0).sum())

    def equal(self, x: Any, y: Any) -> bool:
        return bool(self.torch.equal(x, y))

    def permute(self, x: Any, axes: Sequence[int]) -> Any:
        return x.permute(*axes)

    def broadcast(self, x: Any, shape: Sequence[int]) -> Any:
        return self.torch.broadcast_to(x, tuple(shape))

    def cat(self, xs: Sequence[Any], axis: int) -> Any:
        return self.torch.cat(list(xs), dim=axis)


def gpu_arithmetic() -> TorchArithmetic | None:
    """Torch on a CUDA GPU, or None without one (or in a forked child process,
    where CUDA cannot be used once its parent has initialised it)."""
    return _gpu_arithmetic(os.getpid())


@functools.cache
def _gpu_arithmetic(pid: int) -> TorchArithmetic | None:
    """torch is only imported where a GPU could be: it is already loaded, or the
    machine has an NVIDIA device node. Importing it costs seconds on the CPU."""
    if pid != _MAIN_PID and "torch" in sys.modules:
        return None
    if "torch" not in sys.modules and not Path("/dev/nvidiactl").exists():
        return None
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return TorchArithmetic("cuda")
