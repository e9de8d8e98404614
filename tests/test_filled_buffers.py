"""A new buffer filled slice by slice runs as a concatenation in a µGraph
(``mirage_xdsl/torch/filled_buffers.py``), and only where that is exact."""

from __future__ import annotations

import logging
import re

import pytest
import torch

INTERPRET = {"cpu": "interpret", "superoptimize": False}


def mla_key(kv, kr):
    """DeepSeek's key: a new buffer, its first 16 channels and its last 8
    written, the last broadcast over the heads; then read by a slice."""
    k = kv.new_empty(*kv.shape[:-1], 24)
    k[..., :16].copy_(kv * 2.0)
    k[..., 16:].copy_(kr.expand(-1, 4, -1, -1))
    return torch.softmax(k[:, :, :3] @ k.transpose(-1, -2), -1)


def gap(kv, kr):
    """Channels 16 to 18 are never written: not a concatenation."""
    k = torch.zeros(*kv.shape[:-1], 26)
    k[..., :16].copy_(kv * 2.0)
    k[..., 18:].copy_(kr.expand(-1, 4, -1, -1))
    return k * 3.0


def read_between(kv, kr):
    """The buffer is read between its writes: not a concatenation."""
    k = kv.new_empty(*kv.shape[:-1], 24)
    k[..., :16].copy_(kv * 2.0)
    first = k[..., :16] + 1.0
    k[..., 16:].copy_(kr.expand(-1, 4, -1, -1))
    return first, k * 3.0


def written_again(kv, kr):
    """A third write through another view of the buffer: not a concatenation."""
    k = kv.new_empty(*kv.shape[:-1], 24)
    k[..., :16].copy_(kv * 2.0)
    k[..., 16:].copy_(kr.expand(-1, 4, -1, -1))
    k[:, :1].mul_(0.5)
    return k * 3.0


def run(fn, caplog):
    g = torch.Generator().manual_seed(7)
    kv, kr = torch.randn(1, 4, 5, 16, generator=g), torch.randn(1, 1, 5, 8, generator=g)
    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(kv, kr), fn(kv, kr))
    return [m for m in caplog.messages if m.startswith("mirage:")]


def test_a_buffer_filled_by_slices_is_one_ugraph(caplog):
    log = run(mla_key, caplog)
    assert any(re.search(r"ops as 1 µGraphs, 0 as torch", m) for m in log), log
    assert any("aten.cat" in m and "new_empty" in m for m in log)


@pytest.mark.parametrize("fn", [read_between, written_again])
def test_a_buffer_read_or_written_otherwise_stays_as_written(fn, caplog):
    log = run(fn, caplog)
    assert any("torch  aten.new_empty" in m for m in log), log


def test_a_buffer_with_a_gap_stays_as_written(caplog):
    log = run(gap, caplog)
    assert any("torch  aten.zeros" in m for m in log), log
    assert not any("aten.cat" in m for m in log)
