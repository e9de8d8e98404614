"""Sibling linears of one input are captured as one matmul sliced per linear;
linears combined element-wise stay apart."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

from mirage_xdsl.dialects import tensor_ops as t  # noqa: E402
from mirage_xdsl.torch import MirageFunction, capture_program  # noqa: E402
from mirage_xdsl.torch.models import DecodeLayer, DecoderLayer, trained  # noqa: E402

TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3}


def matmul_rhs(module) -> list[tuple[int, ...]]:
    """The weight shape of every kernel.matmul reading a 2-d operand."""
    return [
        t.tensor_shape(op.operands[1])
        for op in module.walk()
        if op.name == "kernel.matmul" and len(t.tensor_shape(op.operands[1])) == 2
    ]


def kernel_ops(module) -> list[str]:
    return [op.name for op in module.walk() if op.name.startswith("kernel.")]


def rel_err(out, ref) -> float:
    return float((out.float() - ref.float()).norm() / ref.float().norm())


def check_matches(captured, fn, xs, dtype) -> None:
    with torch.no_grad():
        outs, refs = MirageFunction(captured)(*xs), fn(*xs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    refs = refs if isinstance(refs, tuple) else (refs,)
    for out, ref in zip(outs, refs, strict=True):
        assert out.dtype == ref.dtype and out.shape == ref.shape
        assert rel_err(out, ref) < TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_decode_layer_projects_q_k_v_with_one_matmul(dtype):
    layer = trained(DecodeLayer(dim=64, heads=4, kv_heads=2, hidden=96)).to(dtype)
    x = torch.randn(1, 1, 64).to(dtype)
    xs = [x, *layer.cache(1, 8)]
    captured = capture_program(layer, xs)
    # q/k/v: [64, 64 + 32 + 32]; output projection; gate and up apart; down
    rhs = [(64, 128), (64, 64), (64, 96), (64, 96), (96, 64)]
    assert matmul_rhs(captured.module) == rhs
    assert kernel_ops(captured.module).count("kernel.slice") == 3
    weights = [tuple(p.shape) for p in captured.parameters]
    # one [out, in] weight of the three, as nn.Linear keeps each
    assert (128, 64) in weights and (32, 64) not in weights
    check_matches(captured, layer, xs, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_decoder_layer_fuses_q_k_v_and_keeps_gate_and_up(dtype):
    layer = trained(DecoderLayer(dim=64, heads=4, kv_heads=2, hidden=96)).to(dtype)
    x = torch.randn(2, 5, 64).to(dtype)
    captured = capture_program(layer, [x])
    rhs = matmul_rhs(captured.module)
    assert rhs.count((64, 128)) == 1 and rhs.count((64, 96)) == 2
    assert (64, 32) not in rhs
    check_matches(captured, layer, [x], dtype)


class Heads(nn.Module):
    """Three projections of one input, with biases or without."""

    def __init__(self, bias: bool):
        super().__init__()
        self.a = nn.Linear(16, 8, bias=bias)
        self.b = nn.Linear(16, 24, bias=bias)
        self.c = nn.Linear(16, 4, bias=bias)

    def forward(self, x):
        return self.a(x) * 2.0, torch.relu(self.b(x)), self.c(x).sum(-1, keepdim=True)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_siblings_share_one_matmul_and_one_bias_add(bias):
    torch.manual_seed(1)
    model = Heads(bias)
    x = torch.randn(3, 16)
    captured = capture_program(model, [x])
    assert matmul_rhs(captured.module) == [(16, 36)]
    ops = kernel_ops(captured.module)
    assert ops.count("kernel.add") == (1 if bias else 0)
    shapes = [tuple(p.shape) for p in captured.parameters]
    assert shapes == ([(36, 16), (36,)] if bias else [(36, 16)])
    check_matches(captured, model, [x], torch.float32)


class Gated(nn.Module):
    """Gate and up projections combined by one multiply, and two more
    projections of the same input that nothing combines."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(16, 32, bias=False)
        self.up = nn.Linear(16, 32, bias=False)
        self.p = nn.Linear(16, 8, bias=False)
        self.q = nn.Linear(16, 12, bias=False)

    def forward(self, x):
        mixed = F.silu(self.gate(x)) * self.up(x).view(2, 4, 32).view(8, 32)
        return mixed, self.p(x), self.q(x).t()


def test_linears_combined_element_wise_stay_apart():
    torch.manual_seed(2)
    model = Gated()
    x = torch.randn(8, 16)
    captured = capture_program(model, [x])
    assert matmul_rhs(captured.module) == [(16, 32), (16, 32), (16, 20)]
    check_matches(captured, model, [x], torch.float32)


class Mixed(nn.Module):
    """Two projections, one with a bias and one without, and one by a weight
    that is an input."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 8, bias=True)
        self.b = nn.Linear(16, 8, bias=False)

    def forward(self, x, w):
        return self.a(x), self.b(x), F.linear(x, w)


def test_a_bias_on_some_or_an_input_weight_is_not_fused():
    torch.manual_seed(3)
    model = Mixed()
    x, w = torch.randn(4, 16), torch.randn(8, 16)
    captured = capture_program(model, [x, w])
    assert kernel_ops(captured.module).count("kernel.matmul") == 3
    assert "kernel.slice" not in kernel_ops(captured.module)
    check_matches(captured, model, [x, w], torch.float32)


def test_the_switch_captures_each_linear_on_its_own(monkeypatch):
    monkeypatch.setenv("MIRAGE_FUSE_SIBLINGS", "0")
    model = Heads(bias=False)
    captured = capture_program(model, [torch.randn(3, 16)])
    assert matmul_rhs(captured.module) == [(16, 8), (16, 24), (16, 4)]
    assert "kernel.slice" not in kernel_ops(captured.module)
