"""How ``mirage_xdsl.torch.partition`` groups a Dynamo graph's ops into parts."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mirage_xdsl.torch.partition import partition  # noqa: E402
from mirage_xdsl.torch.rules.siblings import is_linear  # noqa: E402
from mirage_xdsl.torch.trace import export  # noqa: E402

INTERPRET = {"cpu": "interpret", "superoptimize": False}


class WriteBetweenSiblings(torch.nn.Module):
    """Two projections of one input; the first's result is written into a
    cache (torch) that the second's reader reads after the write."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.k = torch.nn.Linear(8, 4, bias=False)
        self.q = torch.nn.Linear(8, 6, bias=False)

    def forward(self, x, cache, position):
        h = x * 2.0
        cache.index_copy_(0, position, self.k(h))
        return torch.exp(self.q(h)) @ cache


def upcast_norm_then_matmul(x, w, m):
    y = x.to(torch.float32)
    y = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5)
    return (w * y.to(x.dtype)) @ m


def parts_of(fn, *xs):
    """The parts the backend makes of ``fn``'s one Dynamo graph."""
    found = []

    def grab(gm, example_inputs):
        found.extend(partition(export(gm, example_inputs).module()).parts)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=grab, dynamic=False)(*xs)
    return found


def cache_inputs():
    return torch.randn(1, 8), torch.zeros(6, 4), torch.tensor([2])


def test_a_linear_joins_an_earlier_part_holding_its_sibling():
    """The query projection, grouped with its reader after the cache write,
    moves to the part of the key projection of the same input."""
    parts = parts_of(WriteBetweenSiblings(), *cache_inputs())
    linears = [[n for n in p.nodes if is_linear(n)] for p in parts]
    assert sorted(len(found) for found in linears if found) == [2]
    (first,) = [p for p, found in zip(parts, linears, strict=True) if found]
    assert "kernel.matmul" in str(first.captured.module)


def test_a_moved_linear_computes_what_torch_does():
    model = WriteBetweenSiblings()
    want_cache, got_cache = torch.zeros(6, 4), torch.zeros(6, 4)
    x, _, position = cache_inputs()
    with torch.no_grad():
        want = model(x, want_cache, position)
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="mirage", options=INTERPRET)
        got = compiled(x, got_cache, position)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_cache, want_cache)


def test_export_checks_do_not_make_a_norm_an_output():
    """``.to(dtype)`` leaves torch.export's metadata checks on the norm's
    values; the part still returns only the product."""
    xs = (
        torch.randn(1, 16, dtype=torch.float16),
        torch.randn(16, dtype=torch.float16),
        torch.randn(16, 8, dtype=torch.float16),
    )
    (part,) = parts_of(upcast_norm_then_matmul, *xs)
    assert len(part.results) == 1
    assert "kernel.rms_norm" in str(part.captured.module)


def append_to_an_empty_cache(x):
    """A transformers ``DynamicCache`` layer's first update."""
    keys = torch.tensor([], dtype=x.dtype)
    return torch.exp(torch.cat([keys, x * 2.0], dim=-2))


def test_an_empty_piece_of_a_concatenation_is_no_input_of_a_part():
    """torch.cat skips the empty tensor; a part reading it took an input of
    no size, which the GPU runtime refused (the part ran as torch)."""
    x = torch.randn(1, 2, 3, 4)
    (part,) = parts_of(append_to_an_empty_cache, x)
    assert [tuple(i.meta["val"].shape) for i in part.inputs] == [(1, 2, 3, 4)]
    compiled = torch.compile(
        append_to_an_empty_cache, backend="mirage", options=INTERPRET
    )
    torch.testing.assert_close(compiled(x), append_to_an_empty_cache(x))
