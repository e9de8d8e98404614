"""The PyTorch side of the benchmark: each workload as a user would write it.

Every function takes the workload's inputs in the workload's layout (fp16 CUDA
tensors) and returns a tuple of outputs, so eager mode, ``torch.compile`` and
the CUDA-graph timer all use it unchanged. RMSNorm is unit-weight; attention
is the workloads' ``softmax(Q·K)·V`` with no ``1/sqrt(d)`` scale (softmax's
max subtraction changes nothing mathematically). For attention the
``scaled_dot_product_attention`` variants take K as ``[b, heads, keys, d]``
(its own layout, prepared once outside the timed region) and ``scale=1.0``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],))


def gqa(q, k, v):
    return (torch.softmax(q @ k, dim=-1) @ v,)


def qknorm_gqa(q, k, v):
    return gqa(rms_norm(q), k, rms_norm(v))


def rmsnorm_linear(x, w):
    return (rms_norm(x) @ w,)


def lora(x, w, a, b):
    return (x @ w + (x @ a) @ b,)


def gated_mlp(x, a, b):
    return (F.silu(x @ a) * (x @ b),)


def norm_transformer(x, h, alpha):
    return (rms_norm(h) + x, rms_norm(x + alpha * x))


EAGER: dict[str, Callable[..., tuple[torch.Tensor, ...]]] = {
    f.__name__: f
    for f in (gqa, qknorm_gqa, rmsnorm_linear, lora, gated_mlp, norm_transformer)
}


def sdpa_backends() -> dict[str, object]:
    from torch.nn.attention import SDPBackend

    names = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
    return {n.lower(): getattr(SDPBackend, n) for n in names if hasattr(SDPBackend, n)}


def sdpa_variant(workload: str, backend) -> Callable | None:
    """``f(q, k_t, v)`` through SDPA on one backend, for the attention workloads.

    ``k_t`` is K transposed to ``[b, heads, keys, d]`` and made contiguous.
    """
    from torch.nn.attention import sdpa_kernel

    def attend(q, k_t, v):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k_t, v, scale=1.0)

    if workload == "gqa":
        return lambda q, k_t, v: (attend(q, k_t, v),)
    if workload == "qknorm_gqa":
        return lambda q, k_t, v: (attend(rms_norm(q), k_t, rms_norm(v)),)
    return None


def sdpa_inputs(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    q, k, v = inputs
    return [q, k.transpose(-1, -2).contiguous(), v]
