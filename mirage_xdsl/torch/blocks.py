"""Llama-style blocks for one decode step, named as Hugging Face's Llama names
them, so a tensor-parallel plan written for Llama applies as it is.

- :class:`GatedMLP`: ``down_proj(silu(gate_proj(x)) * up_proj(x))``;
- :class:`DecodeAttention`: the new token's query, key and value projections,
  attention of its query over the key/value cache (grouped heads), and the
  output projection; the new keys and values are returned for the cache
  write. Head counts are read off the tensors (``view(.., -1, ..)``), as
  Hugging Face's code does, so a module whose projections are split by heads
  runs unchanged.

Tokens are rows: ``x`` is ``[batch, hidden]`` (one new token per sequence).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class GatedMLP(nn.Module):
    """Llama's MLP: ``down_proj(silu(gate_proj(x)) * up_proj(x))``."""

    def __init__(self, hidden: int, ffn: int, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, ffn, bias=False, dtype=dtype)
        self.up_proj = nn.Linear(hidden, ffn, bias=False, dtype=dtype)
        self.down_proj = nn.Linear(ffn, hidden, bias=False, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecodeAttention(nn.Module):
    """Attention of one new token per sequence over a key/value cache
    ``[batch, kv_heads, keys, head_dim]``, grouped heads; returns the output
    and the token's keys and values ``[batch, kv_heads, 1, head_dim]``."""

    def __init__(
        self,
        hidden: int,
        heads: int,
        kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
    ):
        super().__init__()
        self.head_dim = head_dim
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False, dtype=dtype)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False, dtype=dtype)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=False, dtype=dtype)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False, dtype=dtype)

    def forward(
        self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, d = x.shape[0], self.head_dim
        q = self.q_proj(x).view(b, -1, 1, d)
        k = self.k_proj(x).view(b, -1, 1, d)
        v = self.v_proj(x).view(b, -1, 1, d)
        out = F.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=True)
        return self.o_proj(out.reshape(b, -1)), k, v


def initialise(module: nn.Module, seed: int = 0) -> nn.Module:
    """Weights of unit gain (std ``1/sqrt(fan_in)``), as a trained model's
    projections have: activations keep their scale through the block."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.Linear):
                std = m.in_features**-0.5
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * std)
    return module
