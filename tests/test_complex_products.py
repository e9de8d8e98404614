"""Rotary embeddings written with complex numbers run as real arithmetic in
a µGraph (``mirage_xdsl/torch/complex_products.py``)."""

from __future__ import annotations

import logging

import pytest
import torch

INTERPRET = {"cpu": "interpret", "superoptimize": False}


def rope(xq, freqs):
    """Meta's and torchtitan's rotary embedding: a complex product."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    return torch.view_as_real(xq_ * freqs[:, :, None, :]).flatten(3).type_as(xq) * 2.0


def rope_table_first(xq, freqs):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    return torch.view_as_real(freqs[:, :, None, :] * xq_).flatten(3) + 1.0


def complex_kept(xq, freqs):
    """The product is read as a complex tensor too: it stays as written."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    z = xq_ * freqs[:, :, None, :]
    return torch.view_as_real(z).flatten(3) * 2.0, z.abs()


def inputs():
    g = torch.Generator().manual_seed(8)
    xq = torch.randn(1, 5, 4, 16, generator=g)
    angles = torch.arange(5.0)[:, None] * torch.arange(8.0)[None] * 0.1
    return xq, torch.polar(torch.ones_like(angles), angles)[None]


def run(fn, caplog):
    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        got, want = compiled(*inputs()), fn(*inputs())
    torch.testing.assert_close(got, want)
    return [m for m in caplog.messages if m.startswith("mirage:")]


@pytest.mark.parametrize("fn", [rope, rope_table_first])
def test_a_complex_rotation_runs_as_real_pairs(fn, caplog):
    """Only the table's complex views stay torch; the rotation, the
    flattening and what follows are one µGraph."""
    log = run(fn, caplog)
    assert any("as 1 µGraphs, 2 as torch" in m for m in log), log
    kept = [m.split()[2] for m in log if m.startswith("mirage:   torch")]
    assert sorted(kept) == ["aten.unsqueeze", "aten.view_as_real"]


def test_a_complex_product_read_as_complex_stays_as_written(caplog):
    log = run(complex_kept, caplog)
    assert any("torch  aten.view_as_complex" in m for m in log), log


class BufferedRope(torch.nn.Module):
    """torchtitan's form: the table a complex buffer, the rotation after a
    projection."""

    def __init__(self):
        super().__init__()
        angles = torch.arange(5.0)[:, None] * torch.arange(8.0)[None] * 0.1
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))
        self.wq = torch.nn.Linear(64, 64, bias=False)

    def forward(self, x):
        xq = self.wq(x).view(1, 5, 4, 16)
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        rotated = torch.view_as_real(xq_ * self.freqs_cis.view(1, 5, 1, 8))
        return rotated.flatten(3).type_as(xq)


def test_capture_program_takes_a_complex_buffer_as_real_pairs():
    from mirage_xdsl.torch import MirageFunction, capture_program

    torch.manual_seed(0)
    module, x = BufferedRope(), torch.randn(1, 5, 64)
    captured = capture_program(module, [x])
    assert all(not p.is_complex() for p in captured.parameters)
    torch.testing.assert_close(MirageFunction(captured)(x), module(x))


class TitanBlock(torch.nn.Module):
    """A decoder block as torchtitan writes one: ``nn.RMSNorm``, complex
    rotary from a table sliced to the sequence, keys and values repeated by
    ``expand``, causal SDPA, a SiLU-gated MLP."""

    def __init__(self, dim=64, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        linear = lambda i, o: torch.nn.Linear(i, o, bias=False)  # noqa: E731
        self.wq, self.wo = linear(dim, dim), linear(dim, dim)
        self.wk, self.wv = (
            linear(dim, kv_heads * self.hd),
            linear(dim, kv_heads * self.hd),
        )
        self.w1, self.w2, self.w3 = linear(dim, 128), linear(128, dim), linear(dim, 128)
        self.attention_norm, self.ffn_norm = (
            torch.nn.RMSNorm(dim),
            torch.nn.RMSNorm(dim),
        )
        angles = torch.outer(torch.arange(32.0), 0.5 ** torch.arange(self.hd // 2.0))
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))

    def rotate(self, x):
        x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        f = self.freqs_cis[: x.shape[1]].view(1, x.shape[1], 1, -1)
        return torch.view_as_real(x_ * f).flatten(3).type_as(x)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.attention_norm(x)
        q = self.rotate(self.wq(h).view(b, t, self.heads, self.hd))
        k = self.rotate(self.wk(h).view(b, t, self.kv_heads, self.hd))
        v = self.wv(h).view(b, t, self.kv_heads, self.hd)
        rep = self.heads // self.kv_heads
        k, v = (
            y[:, :, :, None]
            .expand(b, t, self.kv_heads, rep, self.hd)
            .reshape(b, t, -1, self.hd)
            for y in (k, v)
        )
        o = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + self.wo(o.transpose(1, 2).reshape(b, t, -1))
        h = self.ffn_norm(x)
        return x + self.w2(torch.nn.functional.silu(self.w1(h)) * self.w3(h))


def test_a_torchtitan_style_block_is_one_ugraph(caplog):
    torch.manual_seed(0)
    block, x = TitanBlock().eval(), torch.randn(2, 9, 64)
    compiled = torch.compile(block, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), block(x))
    log = [m for m in caplog.messages if m.startswith("mirage:")]
    assert any("as 1 µGraphs" in m for m in log), log
    kept = {m.split()[2] for m in log if m.startswith("mirage:   torch")}
    assert kept == {"aten.slice", "aten.view", "aten.view_as_real"}, kept
