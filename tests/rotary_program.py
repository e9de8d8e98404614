"""A rotary embedding written as plain torch: ``x * cos + rotate_half(x) * sin``.

Shared by ``tests/test_row_layouts.py`` and ``tests/triton_interpret.py``
(its ``rotary`` case): the search makes the captured program one kernel,
which must match torch under our interpreter and under Triton's.
"""

from __future__ import annotations

import torch

from mirage_xdsl.torch import MirageFunction, superoptimize

HEADS, DIM = 8, 64
DTYPES = {"f32": torch.float32, "f16": torch.float16}


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of ``x`` [1, heads, 1, dim] with cos/sin [1, 1, 1, dim]."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def example(dtype: str, seed: int = 0) -> list[torch.Tensor]:
    """One decode token's query and its position's cos and sin."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(1, HEADS, 1, DIM, generator=gen)
    angle = torch.rand(1, 1, 1, DIM, generator=gen) * 6.28
    return [t.to(DTYPES[dtype]) for t in (x, angle.cos(), angle.sin())]


def reference(inputs: list[torch.Tensor]) -> torch.Tensor:
    """torch's rotary in fp32 of the same (possibly fp16) inputs."""
    return rotary(*[t.float() for t in inputs])


def searched(dtype: str) -> MirageFunction:
    """The rotary captured and searched by the cost model (no cache)."""
    return superoptimize(
        rotary,
        example(dtype),
        budget=5.0,
        jobs=1,
        cache_dir="none",
        log=None,
        measure=None,
    )
