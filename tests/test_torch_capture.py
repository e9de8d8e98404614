"""The torch front end: capture into the kernel dialect, errors, patterns."""

import inspect
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from mirage_xdsl.ir.printing import module_text  # noqa: E402
from mirage_xdsl.semantics.interpreter import run  # noqa: E402
from mirage_xdsl.torch import (  # noqa: E402
    CaptureError,
    MirageFunction,
    capture,
    capture_program,
)
from mirage_xdsl.torch.workloads import TORCH_WORKLOADS, example_inputs  # noqa: E402
from mirage_xdsl.workloads import WORKLOADS  # noqa: E402


def half(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(s, generator=g).half() - 0.5 for s in shapes]


def kernel_ops(module) -> list[str]:
    return [op.name for op in module.walk() if op.name.startswith("kernel.")]


def rel_err(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("name", sorted(TORCH_WORKLOADS))
@pytest.mark.parametrize("batch", [1, 8])
def test_workload_captures_to_the_registered_program(name, batch):
    captured = capture(TORCH_WORKLOADS[name], example_inputs(name, batch, scale=8))
    assert module_text(captured) == module_text(WORKLOADS[name].module(batch, 8))


@pytest.mark.parametrize("name", sorted(TORCH_WORKLOADS))
def test_interpreter_agrees_with_torch(name):
    inputs = example_inputs(name, batch=2, scale=8, seed=5)
    outs = run(capture(TORCH_WORKLOADS[name], inputs), [x.numpy() for x in inputs])
    refs = TORCH_WORKLOADS[name](*[x.float() for x in inputs])
    refs = [refs] if isinstance(refs, torch.Tensor) else list(refs)
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs, strict=True):
        assert out.shape == tuple(ref.shape)
        assert rel_err(out, ref.numpy()) < 1e-5


def line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def erf_after_matmul(x, w):
    y = x @ w
    return torch.erf(y)


def test_unsupported_op_names_op_and_user_line():
    with pytest.raises(CaptureError) as e:
        capture(erf_after_matmul, half((2, 8), (8, 8)))
    line = line_of(erf_after_matmul, "torch.erf")
    message = str(e.value)
    assert message.startswith(f"{__file__}:{line}:12: error: torch op 'aten.erf'")
    assert message.endswith("(in `return torch.erf(y)`)")
    assert "\n" not in message


@pytest.mark.parametrize(
    "fn, fragment",
    [
        (lambda x: torch.add(x, 1.0, alpha=2), "options {'alpha': 2}"),
        (lambda x: x.mean() + x, "a mean over every dim"),
        (lambda x: x + torch.cumsum(x, 0), "'aten.cumsum'"),
        (lambda x: x.sum() + x, "a sum over every dim"),
        (lambda x: x.pow(0.5), "exponent 0.5"),
        (lambda x: torch.sub(x, x, alpha=2), "options {'alpha': 2}"),
        (lambda x: torch.rsub(x, 1.0, alpha=2), "options {'alpha': 2}"),
        (lambda x: x + torch.sort(x, -1)[0], "'aten.sort'"),
    ],
)
def test_unsupported_programs_fail_with_one_line(fn, fragment):
    with pytest.raises(CaptureError) as e:
        capture(fn, half((4, 4)))
    assert fragment in str(e.value)
    assert str(e.value).startswith(f"{__file__}:")


def test_lower_rank_operands_broadcast_from_the_right():
    x, a = torch.randn(2, 8), torch.randn(8)
    captured = capture_program(lambda x, a: x * a, [x, a])
    assert kernel_ops(captured.module) == ["kernel.mul"]
    torch.testing.assert_close(MirageFunction(captured)(x, a), x * a)


RMS_FORMS = {
    "rsqrt_pow": lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)),
    "rsqrt_eps": lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6),
    "rsqrt_first": lambda x: torch.rsqrt((x * x).mean(dim=-1, keepdim=True)) * x,
    "div_sqrt": lambda x: x / torch.sqrt(torch.square(x).mean(-1, keepdim=True)),
    "functional": lambda x: F.rms_norm(x, (x.shape[-1],)),
    "module": torch.nn.RMSNorm(16).half(),
}


@pytest.mark.parametrize("form", sorted(RMS_FORMS))
def test_rms_norm_forms(form):
    module = capture(RMS_FORMS[form], half((4, 16)))
    assert kernel_ops(module) == ["kernel.rms_norm"]


@pytest.mark.parametrize(
    "fn, op, constant",
    [
        (lambda x: x * 2.0, "kernel.mul_scalar", 2.0),
        (lambda x: 0.5 * x, "kernel.mul_scalar", 0.5),
        (lambda x: x / 8, "kernel.mul_scalar", 0.125),
        (lambda x: x + 1.0, "kernel.add_scalar", 1.0),
        (lambda x: 1.0 + x, "kernel.add_scalar", 1.0),
        (lambda x: x - 0.25, "kernel.add_scalar", -0.25),
    ],
)
def test_python_scalars_become_constant_ops(fn, op, constant):
    (x,) = half((4, 16))
    module = capture(fn, [x])
    (found,) = [o for o in module.walk() if o.name.startswith("kernel.")]
    assert found.name == op and found.value == constant
    out = MirageFunction(capture_program(fn, [x]))(x)
    assert rel_err(out.float().numpy(), fn(x.float()).numpy()) < 1e-3


def test_scaled_attention_captures_and_matches_torch():
    def attention(q, k, v):
        return torch.softmax((q @ k) * 0.125, -1) @ v

    q, k, v = half((2, 8, 64), (2, 64, 32), (2, 32, 64), seed=3)
    captured = capture_program(attention, [q, k, v])
    assert "kernel.mul_scalar" in kernel_ops(captured.module)
    out = MirageFunction(captured)(q, k, v)
    ref = attention(q.float(), k.float(), v.float())
    assert rel_err(out.float().numpy(), ref.numpy()) < 1e-3


@pytest.mark.parametrize(
    "form",
    [
        torch.nn.RMSNorm(16, eps=1e-6),
        lambda x: F.rms_norm(x, (16,), eps=1e-6),
        lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6),
    ],
    ids=["module", "functional", "rsqrt"],
)
def test_rms_norm_keeps_its_epsilon(form):
    (x,) = half((4, 16), seed=2)
    x = x.float() * 1e-3  # small rows, where eps matters
    captured = capture_program(form, [x])
    (norm,) = [o for o in captured.module.walk() if o.name == "kernel.rms_norm"]
    assert norm.eps_value == 1e-6
    out = MirageFunction(captured)(x)
    ref = form(x).detach()
    assert rel_err(out.float().numpy(), ref.numpy()) < 1e-4


def test_rms_norm_with_a_trained_weight_multiplies_by_it():
    norm = torch.nn.RMSNorm(16, eps=0.0).half()
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 2.0, 16))
    (x,) = half((4, 16))
    captured = capture_program(norm, [x])
    assert kernel_ops(captured.module) == ["kernel.rms_norm", "kernel.mul"]
    assert [tuple(p.shape) for p in captured.parameters] == [(1, 16)]
    out = MirageFunction(captured)(x)
    ref = norm.float()(x.float()).detach()
    assert rel_err(out.float().numpy(), ref.numpy()) < 1e-3


class Transposed(torch.nn.Module):
    """A weight stored ``[out, in]`` and used transposed, as users write it."""

    def __init__(self, form: str) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.form = form
        self.w = torch.nn.Parameter((torch.rand(24, 16, generator=g) - 0.5).half())

    def forward(self, x):
        w = {"T": self.w.T, "t": self.w.t(), "transpose": self.w.transpose(0, 1)}
        return x @ w[self.form]


@pytest.mark.parametrize("form", ["T", "t", "transpose"])
def test_transposed_parameter_is_transposed_at_capture(form):
    model = Transposed(form)
    (x,) = half((4, 16))
    captured = capture_program(model, [x])
    assert kernel_ops(captured.module) == ["kernel.matmul"]
    assert [tuple(p.shape) for p in captured.parameters] == [(16, 24)]
    out = MirageFunction(captured)(x)
    ref = model.float()(x.float()).detach()
    assert rel_err(out.float().numpy(), ref.numpy()) < 1e-3


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("shape", [(4, 16), (2, 3, 16)], ids=["rank2", "rank3"])
def test_nn_linear_captures_and_matches_torch(bias, shape):
    torch.manual_seed(4)
    model = torch.nn.Linear(16, 24, bias=bias).half()
    (x,) = half(shape)
    captured = capture_program(model, [x])
    ops = ["kernel.transpose", "kernel.matmul"] + (["kernel.add"] if bias else [])
    assert kernel_ops(captured.module) == ops
    # the weight passed in as nn.Linear keeps it, not copied, read transposed
    assert captured.parameters[0].data_ptr() == model.weight.data_ptr()
    out = MirageFunction(captured)(x)
    ref = model.float()(x.float()).detach()
    assert out.shape == ref.shape
    assert rel_err(out.float().numpy(), ref.numpy()) < 1e-3


def test_two_linear_layers_and_a_batched_weight():
    torch.manual_seed(5)
    mlp = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.SiLU(), torch.nn.Linear(32, 8)
    ).half()
    (x,) = half((2, 4, 16))
    captured = capture_program(mlp, [x])
    assert kernel_ops(captured.module).count("kernel.matmul") == 2
    # the [out, in] weights are passed once, as nn.Linear keeps them: the
    # matmul's batch dims broadcast
    assert [tuple(p.shape) for p in captured.parameters] == [
        (32, 16),
        (32,),
        (8, 32),
        (8,),
    ]
    out = MirageFunction(captured)(x)
    ref = mlp.float()(x.float()).detach()
    assert rel_err(out.float().numpy(), ref.numpy()) < 1e-3


def heads_of(x, w):
    y = (x @ w).view(4, 2, 4).transpose(0, 1)  # [rows, heads, d] -> [heads, rows, d]
    return y.permute(0, 2, 1).reshape(2, 16) * 2.0


def test_layout_changes_of_computed_tensors_match_torch():
    x, w = half((4, 8), (8, 8))
    program = capture(heads_of, [x, w])
    ops = kernel_ops(program)
    assert ops.count("kernel.reshape") == 2 and ops.count("kernel.transpose") == 2
    out = run(program, [x.float().numpy(), w.float().numpy()])[0]
    assert rel_err(out, heads_of(x.float(), w.float()).numpy()) < 1e-6


def one_token_heads(x, w):
    # [b, 1, h, d] -> [b, h, 1, d]: only a dim of extent 1 moves
    return (x @ w).view(2, 1, 4, 2).transpose(1, 2) * 2.0


def test_a_transpose_moving_only_unit_dims_is_a_reshape():
    x, w = half((2, 1, 8), (8, 8))
    program = capture(one_token_heads, [x, w])
    ops = kernel_ops(program)
    assert "kernel.transpose" not in ops and ops.count("kernel.reshape") == 2
    out = run(program, [x.float().numpy(), w.float().numpy()])[0]
    assert rel_err(out, one_token_heads(x.float(), w.float()).numpy()) < 1e-6


@pytest.mark.parametrize(
    "order, swaps", [((0, 1, 2), []), ((2, 0, 1), [(0, 2), (1, 2)]), ((1, 0), [(0, 1)])]
)
def test_a_permutation_is_a_sequence_of_swaps(order, swaps):
    from mirage_xdsl.torch.rules import swaps as swaps_of

    assert swaps_of(order) == swaps
    dims = list(range(len(order)))
    for i, j in swaps_of(order):
        dims[i], dims[j] = dims[j], dims[i]
    assert dims == list(order)


def expand_activation(x, w):
    return (x @ w).unsqueeze(0).expand(3, 4, 4)


def test_expand_of_a_computed_tensor_is_a_broadcast():
    x, w = torch.randn(4, 8), torch.randn(8, 4)
    captured = capture_program(expand_activation, [x, w])
    assert kernel_ops(captured.module)[-1] == "kernel.broadcast"
    torch.testing.assert_close(MirageFunction(captured)(x, w), expand_activation(x, w))


def test_linear_of_an_input_weight_transposes_it():
    x, w, b = torch.randn(2, 4, 8), torch.randn(6, 8), torch.randn(6)
    captured = capture_program(F.linear, [x, w, b])
    assert "kernel.transpose" in kernel_ops(captured.module)
    torch.testing.assert_close(
        MirageFunction(captured)(x, w, b), F.linear(x, w, b), rtol=1e-5, atol=1e-5
    )


def sum_of_squares(x):
    s = x * x  # one kernel.square, however often it is used
    return s + s.sum(-1, keepdim=True)


def test_silu_forms_and_squares():
    silu = capture(lambda x: x * torch.sigmoid(x) + F.silu(x), half((4, 8)))
    assert kernel_ops(silu) == ["kernel.silu", "kernel.silu", "kernel.add"]
    square = capture(sum_of_squares, half((4, 8)))
    assert kernel_ops(square) == ["kernel.square", "kernel.reduce_sum", "kernel.add"]


def test_sigmoid_outside_silu_is_its_own_op():
    module = capture(lambda x: torch.sigmoid(x) + x * torch.sigmoid(x), half((4, 8)))
    assert kernel_ops(module) == ["kernel.silu", "kernel.sigmoid", "kernel.add"]


@pytest.mark.parametrize(
    "fn, ops",
    [
        (torch.relu, ["kernel.relu"]),
        (F.relu, ["kernel.relu"]),
        (torch.nn.ReLU(), ["kernel.relu"]),
        (torch.tanh, ["kernel.tanh"]),
        (F.gelu, ["kernel.gelu_erf"]),
        (torch.nn.GELU(), ["kernel.gelu_erf"]),
        (lambda x: F.gelu(x, approximate="tanh"), ["kernel.gelu"]),
        (torch.nn.GELU(approximate="tanh"), ["kernel.gelu"]),
        (lambda x: -x, ["kernel.neg"]),
        (torch.neg, ["kernel.neg"]),
        (
            lambda x: x - torch.sigmoid(x),
            ["kernel.sigmoid", "kernel.neg", "kernel.add"],
        ),
        (
            lambda x: torch.sub(x, torch.relu(x)),
            ["kernel.relu", "kernel.neg", "kernel.add"],
        ),
        (lambda x: 1.0 - x, ["kernel.neg", "kernel.add_scalar"]),
        (
            lambda x: 0.5 - torch.tanh(x),
            ["kernel.tanh", "kernel.neg", "kernel.add_scalar"],
        ),
    ],
)
def test_activations_capture_and_match_torch(fn, ops):
    (x,) = half((4, 8))
    x = 4 * x  # both signs, beyond the linear part of every activation
    captured = capture_program(fn, [x])
    assert kernel_ops(captured.module) == ops
    out = MirageFunction(captured)(x)
    ref = fn(x.float())
    assert rel_err(out.float().numpy(), ref.numpy()) < 2e-3


@pytest.mark.parametrize(
    "activation", [torch.nn.ReLU(), torch.nn.GELU(), torch.nn.GELU("tanh")]
)
def test_activation_mlps_capture_and_match_torch(activation):
    """Linear, activation, Linear: the weights transposed at capture, the
    activation one kernel op, the result torch's through the interpreter."""
    torch.manual_seed(6)
    mlp = torch.nn.Sequential(
        torch.nn.Linear(16, 32), activation, torch.nn.Linear(32, 8)
    ).half()
    (x,) = half((4, 16))
    captured = capture_program(mlp, [x])
    ops = kernel_ops(captured.module)
    assert ops.count("kernel.matmul") == 2
    kind = {"ReLU": "relu", "GELU": "gelu_erf"}[type(activation).__name__]
    if getattr(activation, "approximate", "none") == "tanh":
        kind = "gelu"
    assert f"kernel.{kind}" in ops
    out = MirageFunction(captured)(x)
    ref = mlp.float()(x.float()).detach()
    assert rel_err(out.float().numpy(), ref.numpy()) < 2e-3


SAFE_SOFTMAX = [
    "kernel.reduce_max",
    "kernel.neg",
    "kernel.add",
    "kernel.exp",
    "kernel.reduce_sum",
    "kernel.div",
]


@pytest.mark.parametrize(
    "form",
    [
        lambda x: torch.softmax(x, dim=0),
        lambda x: F.softmax(x, dim=0),
        lambda x: x.softmax(0),
        lambda x: torch.softmax(x, -2),
    ],
    ids=["torch", "functional", "method", "negative-dim"],
)
def test_softmax_subtracts_the_row_maximum(form):
    module = capture(form, half((4, 8)))
    assert kernel_ops(module) == SAFE_SOFTMAX
    assert "reduce_max %0 dim 0" in module_text(module)


def test_softmax_at_natural_scale_matches_torch_and_is_proved_plain_softmax():
    """Normal inputs times 10: the captured softmax is accurate (plain
    exp(x) / sum(exp(x)) would overflow fp16 on such rows), and the verifier
    proves it equal to the plain program."""
    from mirage_xdsl.ir.builder import new_kernel_graph
    from mirage_xdsl.verify.equivalence import equivalent

    x = (torch.randn(8, 64, generator=torch.Generator().manual_seed(4)) * 10).half()
    captured = capture_program(lambda x: torch.softmax(x, -1), [x])
    (out,) = run(captured.module, [x.numpy()])
    assert rel_err(out, torch.softmax(x.float(), -1).numpy()) < 1e-5
    assert not torch.isfinite(torch.exp(x)).all()  # the plain form overflows
    g = new_kernel_graph("plain")
    e = g.exp(g.new_input((8, 64)))
    g.mark_output(g.div(e, g.reduce_sum(e, 1)))
    assert equivalent(captured.module, g.module()).equivalent


def test_torch_softmax_attention_is_proved_equal_to_the_workload():
    """gqa written with torch.softmax captures the safe form; the verifier
    proves it equal to the registered (plain softmax) workload."""
    from mirage_xdsl.verify.equivalence import equivalent

    def attention(q, k, v):
        return torch.softmax(q @ k, dim=-1) @ v

    captured = capture(attention, example_inputs("gqa", 1, scale=8))
    assert "kernel.reduce_max" in kernel_ops(captured)
    assert equivalent(captured, WORKLOADS["gqa"].module(1, 8)).equivalent


@pytest.mark.parametrize(
    "form",
    [
        lambda x: torch.amax(x, -1, keepdim=True),
        lambda x: x.amax(dim=1, keepdim=True),
        lambda x: x.max(dim=-1, keepdim=True).values,
        lambda x: torch.max(x, 1, True)[0],
        lambda x: torch.max(x, dim=1, keepdim=True).values,
    ],
    ids=["amax", "amax-method", "max-values", "max-index-0", "max-kw"],
)
def test_row_maximum_forms_are_reduce_max(form):
    (x,) = half((4, 16), seed=6)
    captured = capture_program(form, [x])
    assert kernel_ops(captured.module) == ["kernel.reduce_max"]
    (out,) = run(captured.module, [x.numpy()])
    assert np.array_equal(out, form(x.float()).numpy())


def test_amax_over_two_dims_is_two_reductions():
    (x,) = half((4, 6, 8), seed=6)
    form = lambda x: torch.amax(x, (0, 2), keepdim=True)  # noqa: E731
    captured = capture_program(form, [x])
    assert kernel_ops(captured.module) == ["kernel.reduce_max"] * 2
    (out,) = run(captured.module, [x.numpy()])
    assert np.array_equal(out, form(x.float()).numpy())


def maxima_without_keepdim(x):
    return torch.amax(x, -1)


def max_over_everything(x):
    return x.max()


def max_indices(x):
    return x.max(dim=-1, keepdim=True).indices


def elementwise_max(x):
    return torch.max(x, x * 2)


@pytest.mark.parametrize(
    "fn, op, why",
    [
        (maxima_without_keepdim, "aten.amax", "amax needs explicit dims and keepdim"),
        (max_over_everything, "aten.max", "max over every dim"),
        (max_indices, "aten.max", "the indices of max"),
        (elementwise_max, "aten.max", "the element-wise maximum of two tensors"),
    ],
)
def test_unsupported_maxima_are_one_located_line(fn, op, why):
    with pytest.raises(CaptureError) as info:
        capture(fn, half((4, 16)))
    message = str(info.value)
    assert "\n" not in message
    assert f"torch op '{op}' is not supported: {why}" in message
    assert f"{__file__}:{line_of(fn, 'return')}:" in message


class NormLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.norm = torch.nn.RMSNorm(16).half()
        self.weight = torch.nn.Parameter((torch.rand(16, 8, generator=g) - 0.5).half())

    def forward(self, x):
        return self.norm(x) @ self.weight


def test_module_parameters_become_trailing_inputs():
    model = NormLinear()
    (x,) = half((4, 16))
    captured = capture_program(model, [x])
    assert kernel_ops(captured.module) == ["kernel.rms_norm", "kernel.matmul"]
    assert len(captured.parameters) == 1  # the unit RMSNorm weight is not an input
    fn = captured.module.body.block.first_op
    assert [str(t) for t in fn.function_type.inputs] == [
        "tensor<4x16xf16>",
        "tensor<16x8xf16>",
    ]
    out = MirageFunction(captured)(x)
    ref = model.float()(x.float())
    assert out.dtype == torch.float16
    assert rel_err(out.float().numpy(), ref.detach().numpy()) < 1e-3


class TwoWeights(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(2)
        self.first = torch.nn.Parameter((torch.rand(8, 4, generator=g) - 0.5).half())
        self.second = torch.nn.Parameter((torch.rand(4, 8, generator=g) - 0.5).half())

    def forward(self, x):
        return (x @ self.second) @ self.first  # used in the other order


def test_parameters_are_passed_in_the_order_they_became_inputs():
    model = TwoWeights()
    (x,) = half((2, 4))
    captured = capture_program(model, [x])
    assert [tuple(p.shape) for p in captured.parameters] == [(4, 8), (8, 4)]
    out = MirageFunction(captured)(x)
    ref = model.float()(x.float()).detach()
    assert rel_err(out.float().numpy(), ref.numpy()) < 1e-3


def test_outputs_keep_their_structure():
    def pair(x):
        return x.exp(), (x.exp(), x)

    (x,) = half((2, 4))
    out = MirageFunction(capture_program(pair, [x]))(x)
    assert isinstance(out, tuple) and isinstance(out[1], tuple)
    torch.testing.assert_close(out[1][1], x)
    torch.testing.assert_close(out[0], x.exp(), rtol=1e-3, atol=1e-3)


def test_a_value_returned_twice_keeps_both_places():
    """``return y, (y, x)``: the program returns ``y`` twice, and the input
    after it stays the input (it was once read from ``y``'s place)."""

    def pair(x):
        y = x.exp()
        return y, (y, x)

    (x,) = half((2, 4))
    out = MirageFunction(capture_program(pair, [x]))(x)
    torch.testing.assert_close(out[1][1], x)
    torch.testing.assert_close(out[1][0], x.exp(), rtol=1e-3, atol=1e-3)


def test_calling_with_other_shapes_is_an_error():
    (x,) = half((2, 4))
    fn = MirageFunction(capture_program(lambda x: x.exp(), [x]))
    with pytest.raises(Exception, match="captured for tensor<2x4xf16>"):
        fn(torch.zeros(3, 4, dtype=torch.float16))


def graph_break_then_exp(x, w):
    torch._dynamo.graph_break()
    return torch.exp(x @ w)


def graph_break_then_erf(x, w):
    torch._dynamo.graph_break()
    return torch.erf(x @ w)


def test_fx_fallback_when_dynamo_cannot_trace():
    module = capture(graph_break_then_exp, half((2, 8), (8, 8)))
    assert kernel_ops(module) == ["kernel.matmul", "kernel.exp"]
    with pytest.raises(CaptureError) as e:
        capture(graph_break_then_erf, half((2, 8), (8, 8)))
    line = line_of(graph_break_then_erf, "torch.erf")
    assert str(e.value).startswith(f"{__file__}:{line}: error: torch op 'aten.erf'")


def test_non_tensor_inputs_are_refused():
    with pytest.raises(CaptureError, match="input 1 \\('n'\\) is a int"):
        capture(lambda x, n: x, [torch.zeros(2), 3])


def test_an_empty_input_is_refused_in_one_line():
    with pytest.raises(
        CaptureError, match=r"input 0 \('x'\) is empty \(shape \(0, 4\)\)"
    ) as e:
        capture(lambda x, w: torch.relu(x @ w), [torch.randn(0, 4), torch.randn(4, 4)])
    assert "\n" not in str(e.value)


def test_a_boolean_mask_input_is_read_as_0_and_1():
    """``capture_program`` takes a boolean mask (the first float input sets
    the compute dtype), and the function converts it when called."""

    def attention(m, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 8, 16, generator=g).half() for _ in range(3))
    m = torch.rand(1, 1, 8, 8, generator=g) < 0.6
    m[..., 0] = True
    captured = capture_program(attention, [m, q, k, v])
    assert "tensor<1x1x8x8xf16>" in module_text(captured.module)
    out = MirageFunction(captured)(m, q, k, v)
    ref = attention(m, q.float(), k.float(), v.float())
    assert out.dtype == torch.float16
    assert rel_err(out.float().numpy(), ref.numpy()) < 2e-3


def test_importing_mirage_xdsl_does_not_import_torch():
    code = (
        "import sys, mirage_xdsl, mirage_xdsl.workloads, mirage_xdsl.cli.opt\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "heads, kv_heads, scale, gqa",
    [
        (4, 4, None, False),
        (4, 2, None, True),
        (2, 1, 0.5, True),
        (4, 1, None, False),  # one key head broadcasts (multi-query attention)
    ],
)
def test_scaled_dot_product_attention_captures_and_matches_torch(
    heads, kv_heads, scale, gqa
):
    q = torch.randn(2, heads, 8, 16)
    k, v = torch.randn(2, kv_heads, 12, 16), torch.randn(2, kv_heads, 12, 16)

    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=gqa)

    program = capture(attention, [q, k, v])
    ops = kernel_ops(program)
    assert ops.count("kernel.matmul") == 2 and "kernel.reduce_max" in ops
    out = run(program, [q.numpy(), k.numpy(), v.numpy()])[0]
    assert rel_err(out, attention(q, k, v).numpy()) < 1e-5


@pytest.mark.parametrize(
    "kwargs, why",
    [
        ({"dropout_p": 0.1}, "dropout_p=0.1"),
    ],
)
def test_unsupported_attention_is_one_line(kwargs, why):
    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, **kwargs)

    q, k = torch.randn(1, 2, 4, 8), torch.randn(1, 1, 4, 8)
    with pytest.raises(CaptureError) as e:
        capture(attention, [q, k, k])
    assert why in str(e.value) and "\n" not in str(e.value)


def test_decoder_layer_captures_without_edits_and_matches_torch():
    from mirage_xdsl.torch.models import DecoderLayer, trained

    layer = trained(DecoderLayer(dim=64, heads=4, kv_heads=2, hidden=96))
    x = torch.randn(1, 16, 64)
    captured = capture_program(layer, [x])
    ops = kernel_ops(captured.module)
    assert ops.count("kernel.rms_norm") == 2 and ops.count("kernel.mul") == 3
    # the heads' transposes, and one per weight (q/k/v joined, o, gate, up,
    # down), each read as nn.Linear keeps it
    assert ops.count("kernel.transpose") == 5 + 5 and "kernel.reshape" in ops
    with torch.no_grad():
        out = MirageFunction(captured)(x)
        assert float((out - layer(x)).norm() / layer(x).norm()) < 1e-5


GLOBAL_LINEAR = torch.nn.Linear(8, 4)


def test_functions_reading_modules_from_closures_and_globals_capture():
    closed = torch.nn.Linear(4, 2)

    def two_layers(x):
        return closed(torch.relu(GLOBAL_LINEAR(x)))

    x = torch.randn(3, 8)
    captured = capture_program(two_layers, [x])
    assert kernel_ops(captured.module).count("kernel.matmul") == 2
    with torch.no_grad():
        torch.testing.assert_close(MirageFunction(captured)(x), two_layers(x))


@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x: x[:, 2:6] * 2.0, "kernel.slice"),
        (lambda x: x[:, ::2] * 2.0, "kernel.matmul"),  # a step: a selection matrix
        (lambda x: x[:, 3:4] + x[:, 1], "kernel.slice"),
        (lambda x: torch.cat([x[:, 4:], -x[:, :4]], dim=-1), "kernel.concat"),
        (lambda x: torch.split(x, 3, dim=1)[2] * 2.0, "kernel.slice"),
        # interleaved rotary's rotate_every_two, and its repeated cos/sin
        (lambda x: torch.stack((-x[:, 1::2], x[:, ::2]), -1).flatten(-2), "concat"),
        (lambda x: torch.repeat_interleave(x[:, :4], 2, dim=-1) * x, "kernel.matmul"),
        (lambda x: torch.stack([x, 2 * x]) + 1.0, "kernel.concat"),
        (lambda x: x.sum(0) * 2.0, "kernel.reshape"),
        # Phi-3's q[..., rotary_dim:] when the rotation spans the head
        (lambda x: torch.cat([x[:, :8] * 2.0, x[:, 8:]], -1), "kernel.mul_scalar"),
        (lambda x: (x * 2.0).type_as(x.half()), "kernel.mul_scalar"),
        (lambda x: (x * 2.0).half(), "kernel.mul_scalar"),  # a cast at the end
    ],
)
def test_slices_and_concatenations_match_torch(fn, op):
    x = torch.randn(3, 8)
    captured = capture_program(fn, [x])
    assert any(o.endswith(op) for o in kernel_ops(captured.module))
    torch.testing.assert_close(MirageFunction(captured)(x), fn(x))


@pytest.mark.parametrize(
    "fn",
    [
        lambda b, x, y: torch.addmm(b[0], x[0], y[0]),
        lambda b, x, y: torch.addmm(b[0, 0], x[0], y[0], beta=0.5, alpha=2.0),
        lambda b, x, y: torch.baddbmm(b, x, y, alpha=0.25),  # BLOOM's ALiBi scores
        lambda b, x, y: torch.baddbmm(b, x, y, beta=0.0),
    ],
)
def test_products_with_an_added_bias_match_torch(fn):
    b, x, y = torch.randn(2, 1, 6), torch.randn(2, 4, 5), torch.randn(2, 5, 6)
    captured = capture_program(fn, [b, x, y])
    torch.testing.assert_close(MirageFunction(captured)(b, x, y), fn(b, x, y))


def test_an_empty_slice_read_by_anything_but_a_concatenation_is_refused():
    with pytest.raises(CaptureError, match="an empty slice") as e:
        capture(lambda x: x[:, 8:] * 2.0, [torch.randn(3, 8)])
    assert "\n" not in str(e.value)


class WrittenLayerNorm(torch.nn.Module):
    """A LayerNorm as Cohere writes it: ``x - mean`` twice, an fp32 upcast of
    the weight, the result cast back with ``type_as``."""

    def __init__(self, dim: int, square: bool):
        super().__init__()
        self.weight = torch.nn.Parameter(1 + 0.3 * torch.randn(dim))
        self.square = square

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        if self.square:
            variance = ((x - mean) * (x - mean)).mean(-1, keepdim=True)
        else:
            variance = (x - mean).pow(2).mean(-1, keepdim=True)
        y = (x - mean) * torch.rsqrt(variance + 1e-5)
        return (self.weight.to(torch.float32) * y).type_as(x)


@pytest.mark.parametrize("square", [False, True], ids=["pow", "product"])
def test_a_subexpression_written_twice_is_one_value_for_the_norm_pattern(square):
    norm = WrittenLayerNorm(16, square)
    x = torch.randn(2, 5, 16)
    captured = capture_program(norm, [x])
    ops = kernel_ops(captured.module)
    assert ops.count("kernel.rms_norm") == 1 and ops.count("kernel.neg") == 1
    with torch.no_grad():
        torch.testing.assert_close(MirageFunction(captured)(x), norm(x))


class NanoAttention(torch.nn.Module):
    """nanoGPT's attention without SDPA: a causal buffer compared with 0,
    the scores filled with -inf where it is, then their softmax."""

    def __init__(self, dim=32, heads=2, block=16):
        super().__init__()
        self.c_attn, self.heads = torch.nn.Linear(dim, 3 * dim), heads
        ones = torch.ones(block, block)
        self.register_buffer("bias", torch.tril(ones).view(1, 1, block, block))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (
            y.view(b, t, self.heads, c // self.heads).transpose(1, 2)
            for y in self.c_attn(x).split(c, dim=2)
        )
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads) ** 0.5)
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        return (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)


def test_a_causal_buffer_and_a_fill_of_minus_infinity_capture_whole():
    """The buffer's slice and comparison are made at capture (a 0/1 mask of
    the sequence's length); the softmax weighs the filled scores 0."""
    torch.manual_seed(0)
    module, x = NanoAttention(), torch.randn(2, 9, 32)
    captured = capture_program(module, [x])
    assert any(tuple(p.shape) == (1, 1, 9, 9) for p in captured.parameters)
    with torch.no_grad():
        torch.testing.assert_close(MirageFunction(captured)(x), module(x))


def test_a_comparison_of_computed_tensors_is_refused_in_one_line():
    with pytest.raises(CaptureError, match="a comparison of computed tensors") as e:
        capture(lambda x: torch.where(x * 2.0 > 0, x, 0.0), [torch.randn(4, 4)])
    assert "\n" not in str(e.value)


def test_an_einsum_with_a_weight_captures_as_a_matmul():
    class Project(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(8, 4))

        def forward(self, x):
            return torch.einsum("bnd,de->bne", x, self.w)

    torch.manual_seed(0)
    module, x = Project(), torch.randn(2, 3, 8)
    captured = capture_program(module, [x])
    assert "kernel.matmul" in module_text(captured.module)
    with torch.no_grad():
        torch.testing.assert_close(MirageFunction(captured)(x), module(x))
