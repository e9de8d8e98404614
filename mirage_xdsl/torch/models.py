"""Ordinary torch models, written the way model code usually is.

They are what the front end is measured on (``tools/torch_models.py``) and
tested with: nothing in them is arranged for mirage. :class:`DecoderLayer` is
a Llama-style transformer block: RMSNorm with weight and epsilon, q/k/v
projections with grouped key/value heads, ``F.scaled_dot_product_attention``
with its default scale, residual adds and a SiLU-gated MLP.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class DecoderLayer(nn.Module):
    """A Llama-style decoder layer (no positional embedding, no mask)."""

    def __init__(
        self,
        dim: int = 1024,
        heads: int = 8,
        kv_heads: int = 2,
        hidden: int = 2816,
        eps: float = 1e-5,
    ):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.attention_norm = nn.RMSNorm(dim, eps=eps)
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)
        self.ffn_norm = nn.RMSNorm(dim, eps=eps)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q = self.wq(x).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return self.wo(out.transpose(1, 2).reshape(b, n, -1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x))
        g = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(g)) * self.w3(g))


class DecodeLayer(DecoderLayer):
    """:class:`DecoderLayer` for one decoding step: each sequence's newest
    token attends over its cached keys and values (``[batch, kv_heads, keys,
    head_dim]``, as ``F.scaled_dot_product_attention`` takes them). The step
    returns the layer's output and the token's own key and value, which the
    caller writes into the cache (the write itself is not part of the layer,
    as in gpt-fast's ``KVCache.update``)."""

    def forward(  # type: ignore[override]
        self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, n, _ = x.shape
        h = self.attention_norm(x)
        q = self.wq(h).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(h).view(b, n, self.kv_heads, self.head_dim)
        v = self.wv(h).view(b, n, self.kv_heads, self.head_dim)
        out = F.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=True)
        h = x + self.wo(out.transpose(1, 2).reshape(b, n, -1))
        g = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(g)) * self.w3(g)), k, v

    def cache(self, batch: int, keys: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Random key and value caches of ``keys`` positions, on the layer's
        device and dtype."""
        w = self.wk.weight
        shape = (batch, self.kv_heads, keys, self.head_dim)
        return (
            torch.randn(shape, device=w.device, dtype=w.dtype),
            torch.randn(shape, device=w.device, dtype=w.dtype),
        )


class PlainSoftmaxLayer(DecoderLayer):
    """:class:`DecoderLayer` with attention written out as ``exp(s) /
    sum(exp(s))``, without the row maximum: the form whose ``exp`` overflows
    fp16 once logits pass about 11 (``log 65504``)."""

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        group = self.heads // self.kv_heads
        q = self.wq(x).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        q = q.reshape(b, self.kv_heads, group * n, self.head_dim)
        k = self.wk(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        e = torch.exp(q @ k.transpose(2, 3) * self.head_dim**-0.5)
        out = (e / e.sum(-1, keepdim=True)) @ v
        out = out.reshape(b, self.heads, n, self.head_dim)
        return self.wo(out.transpose(1, 2).reshape(b, n, -1))


def trained(module: nn.Module, seed: int = 0, qk_gain: float = 1.0) -> nn.Module:
    """``module`` with weights like a trained model's: projections of unit
    gain (std ``1/sqrt(fan_in)``) and norm weights spread around one, so a
    norm's weight is a real multiply and activations keep their scale.

    ``qk_gain`` scales the query and key projections (``wq``, ``wk``): at 2,
    attention logits have a standard deviation of 4 and reach about 20, as in
    trained models, where ``exp`` without the row maximum overflows fp16."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, m in module.named_modules():
            if isinstance(m, nn.Linear):
                gain = qk_gain if name.split(".")[-1] in ("wq", "wk") else 1.0
                std = gain * m.in_features**-0.5
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * std)
            elif isinstance(m, nn.RMSNorm) and m.weight is not None:
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=g))
    return module
