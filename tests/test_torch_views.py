"""Returned slices of a kernel's result are torch views (``torch/views.py``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mirage_xdsl.ir.builder import new_kernel_graph  # noqa: E402
from mirage_xdsl.semantics.interpreter import entry_function  # noqa: E402
from mirage_xdsl.torch import MirageFunction, capture_program  # noqa: E402
from mirage_xdsl.torch.models import DecodeLayer, trained  # noqa: E402
from mirage_xdsl.torch.views import Output, returned_views, take  # noqa: E402


def ops(module) -> list[str]:
    return [op.name for op in entry_function(module).body.block.ops]


def test_a_returned_slice_and_reshape_of_a_product_become_views():
    g = new_kernel_graph("f")
    x, w = g.new_input((2, 8)), g.new_input((8, 12))
    y = g.matmul(x, w)
    g.mark_output(g.reshape(g.slice(y, 1, 4, 8), (2, 2, 2)))
    g.mark_output(g.slice(y, 1, 8, 12))
    module, outputs = returned_views(g.module())
    assert "kernel.slice" not in ops(module)
    assert outputs == [
        Output(0, (("slice", (1, 4, 8)), ("reshape", (2, 2, 2)))),
        Output(0, (("slice", (1, 8, 12)),)),
    ]
    (whole,) = entry_function(module).function_type.outputs.data
    assert tuple(whole.get_shape()) == (2, 12)
    y = torch.arange(24.0).reshape(2, 12)
    a, b = take([y], outputs)
    assert torch.equal(a, y[:, 4:8].reshape(2, 2, 2)) and torch.equal(b, y[:, 8:])
    assert b.data_ptr() == y.data_ptr() + 8 * y.element_size()  # a view


def test_a_slice_of_an_input_or_one_read_elsewhere_keeps_its_kernel():
    g = new_kernel_graph("f")
    x, w = g.new_input((2, 8)), g.new_input((8, 12))
    y = g.matmul(x, w)
    s = g.slice(y, 1, 0, 4)
    g.mark_output(g.slice(x, 1, 0, 4))  # an input's slice: copied
    g.mark_output(g.exp(s))
    g.mark_output(s)  # read by exp too: returned as y, sliced in torch
    module, outputs = returned_views(g.module())
    assert ops(module).count("kernel.slice") == 2
    assert outputs[0] == Output(0) and outputs[2].views == (("slice", (1, 0, 4)),)


def test_a_decode_layer_returns_its_new_key_and_value_as_views():
    torch.manual_seed(0)
    layer = trained(DecodeLayer(dim=64, heads=4, kv_heads=2, hidden=128))
    x = torch.randn(1, 1, 64)
    k_cache, v_cache = layer.cache(1, 16)
    captured = capture_program(layer, [x, k_cache, v_cache])
    found = MirageFunction(captured)
    # the q/k/v product is returned whole; k and v are its views
    assert ops(captured.module).count("kernel.slice") == 3
    assert ops(found.module).count("kernel.slice") == 1  # q, read in place
    out, k, v = found(x, k_cache, v_cache)
    ref_out, ref_k, ref_v = layer(x, k_cache, v_cache)
    for got, want in ((out, ref_out), (k, ref_k), (v, ref_v)):
        torch.testing.assert_close(got, want.detach(), rtol=1e-4, atol=1e-4)


def test_a_view_passed_back_in_is_taken_like_any_tensor():
    """A returned view (here non-contiguous, as at batch 8) may be an input
    again: it is made dense for the kernels, as torch ops accept views."""
    from mirage_xdsl.torch.function import dense

    y = torch.arange(48.0).reshape(4, 12)
    view = y[:, 4:8]
    assert not view.is_contiguous()
    out = dense(view)
    assert out.is_contiguous() and torch.equal(out, view)
    assert dense(y) is y  # nothing copied when nothing needs it
    unaligned = torch.arange(16.0)[1:9]  # contiguous, 4 bytes in
    assert dense(unaligned).data_ptr() % 16 == 0
