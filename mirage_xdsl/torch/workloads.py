"""The six benchmark workloads written as plain torch code.

Each function has the name of its workload in :mod:`mirage_xdsl.workloads`,
and capturing it gives exactly that workload's kernel-dialect program (the
tests check this). ``example_inputs(name, batch, scale)`` makes fp16 inputs
with the workload's shapes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from mirage_xdsl.workloads import WORKLOADS, random_inputs


def rms_norm(x: torch.Tensor) -> torch.Tensor:
    """RMSNorm over the last dim with unit weight and no epsilon."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True))


def gqa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention with the workload's softmax, ``exp(s) / sum(exp(s))``, spelt
    out: ``torch.softmax`` captures the safe form with the row maximum
    subtracted, which the verifier proves equal to this one."""
    e = torch.exp(q @ k)
    return (e / e.sum(-1, keepdim=True)) @ v


def qknorm_gqa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    q = F.rms_norm(q, (q.shape[-1],), eps=0.0)  # the workload has no epsilon
    v = F.rms_norm(v, (v.shape[-1],), eps=0.0)
    return gqa(q, k, v)


def rmsnorm_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return rms_norm(x) @ w


def lora(
    x: torch.Tensor, w: torch.Tensor, a: torch.Tensor, b: torch.Tensor
) -> torch.Tensor:
    return x @ w + (x @ a) @ b


def gated_mlp(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.silu(x @ a) * (x @ b)


def norm_transformer(
    x: torch.Tensor, h: torch.Tensor, alpha: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    residual = rms_norm(h) + x
    y = x + alpha * x
    return residual, y / torch.sqrt(y.pow(2).mean(-1, keepdim=True))


TORCH_WORKLOADS: dict[str, Callable[..., object]] = {
    f.__name__: f
    for f in (gqa, qknorm_gqa, rmsnorm_linear, lora, gated_mlp, norm_transformer)
}


def example_inputs(
    name: str, batch: int = 1, scale: int = 1, seed: int = 0
) -> list[torch.Tensor]:
    """fp16 inputs shaped like ``WORKLOADS[name].module(batch, scale)``'s."""
    module = WORKLOADS[name].module(batch, scale)
    return [torch.from_numpy(x) for x in random_inputs(module, seed)]
