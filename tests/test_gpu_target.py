"""Which GPU the lowering plans for (``gpu_target.current``)."""

from __future__ import annotations

import pytest

from mirage_xdsl import gpu_target
from mirage_xdsl.gpu_target import H100, H200, current, for_device, use


@pytest.fixture(autouse=True)
def _restore(monkeypatch):
    monkeypatch.delenv(gpu_target.ENV, raising=False)
    monkeypatch.setattr(gpu_target, "_opened", None)


def test_a_device_name_maps_to_its_target():
    assert for_device("NVIDIA H200") is H200
    assert for_device("NVIDIA H100 80GB HBM3") is H100
    assert for_device("NVIDIA A100-SXM4-80GB") is H100  # the default


def test_the_opened_gpu_is_current_unless_the_environment_names_one(monkeypatch):
    assert current() is H100
    use(H200)
    assert current() is H200
    monkeypatch.setenv(gpu_target.ENV, "h100")
    assert current() is H100


def test_an_unknown_name_is_one_line(monkeypatch):
    monkeypatch.setenv(gpu_target.ENV, "B200")
    with pytest.raises(
        gpu_target.UnknownTarget, match="MIRAGE_GPU=B200 names no GPU target"
    ):
        current()


def test_the_default_lowering_plans_for_the_current_gpu(monkeypatch):
    """A 2048 -> 16384 projection of one row: single 4 KB columns on an
    H100, pairs on an H200."""
    from mirage_xdsl.dialects import kernel
    from mirage_xdsl.ir.builder import new_kernel_graph
    from mirage_xdsl.ir.context import make_context
    from mirage_xdsl.lowering.default_customize import DefaultCustomizePass

    def grids(name: str | None) -> list:
        if name:
            monkeypatch.setenv(gpu_target.ENV, name)
        g = new_kernel_graph("proj")
        x = g.new_input((1, 2048))
        w = g.transpose(g.new_input((16384, 2048)), 0, 1)
        g.mark_output(g.matmul(x, w))
        module = g.module()
        DefaultCustomizePass().apply(make_context(), module)
        customized = [o for o in module.walk() if isinstance(o, kernel.CustomizedOp)]
        return [tuple(o.grid_dims) for o in customized]

    # the transpose's own kernel, then the product's
    assert grids(None)[-1] == (16384, 1, 1)
    assert grids("H200")[-1] == (8192, 1, 1)
