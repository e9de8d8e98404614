"""The torch front end on CUDA tensors: the search's µGraph runs as our kernels.

Skipped, with the reason, where there is no GPU. Each workload is captured from
plain torch code at reduced shapes, searched, compiled and launched on torch
CUDA tensors, and compared with torch's own result in fp32.
"""

from __future__ import annotations

import logging
import re

import pytest

torch = pytest.importorskip("torch")

from mirage_xdsl.runtime.driver import gpu_unavailable_reason  # noqa: E402
from mirage_xdsl.torch import superoptimize  # noqa: E402
from mirage_xdsl.torch.workloads import TORCH_WORKLOADS, example_inputs  # noqa: E402

REASON = gpu_unavailable_reason() or (
    None if torch.cuda.is_available() else "torch sees no CUDA device"
)
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(REASON is not None, reason=f"{REASON}"),
]

SCALE = 16
"""Large dims divided by this keeps each search to seconds."""

SEARCH = {"max_kernels": 1, "cache_dir": "none"}
"""One kernel deep: the structures the tests look for, found in seconds."""


def _cuda_inputs(name: str, seed: int) -> list[torch.Tensor]:
    # ±0.25 keeps exp(Q·K) inside fp16 range on every workload
    xs = example_inputs(name, batch=1, scale=SCALE, seed=seed)
    return [(x * 0.25).cuda() for x in xs]


def _reference(name: str, xs: list[torch.Tensor]) -> object:
    return TORCH_WORKLOADS[name](*[x.float() for x in xs])


def _rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.float(), ref.float()
    return float(torch.linalg.norm(out - ref) / torch.linalg.norm(ref))


@pytest.mark.parametrize("name", sorted(TORCH_WORKLOADS))
def test_superoptimized_workload_runs_on_cuda_tensors(name: str) -> None:
    fn = superoptimize(TORCH_WORKLOADS[name], _cuda_inputs(name, seed=0), **SEARCH)
    xs = _cuda_inputs(name, seed=1)  # fresh inputs: same function on any input
    outs, refs = fn(*xs), _reference(name, xs)
    if isinstance(refs, torch.Tensor):
        outs, refs = (outs,), (refs,)
    for out, ref in zip(outs, refs, strict=True):
        assert out.is_cuda and out.dtype == torch.float16
        assert not torch.isnan(out).any()
        assert _rel_l2(out, ref) < 2e-2


def test_torch_compile_backend_runs_cuda_graphs_as_mirage_kernels(caplog) -> None:
    torch._dynamo.reset()
    fn = TORCH_WORKLOADS["gated_mlp"]
    compiled = torch.compile(fn, backend="mirage", options=SEARCH)
    xs = _cuda_inputs("gated_mlp", seed=2)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(*xs)
    torch._dynamo.reset()
    assert any(
        re.search(r"graph \d+: 4 ops as 1 µGraphs, 0 as torch", r.message)
        for r in caplog.records
    )
    assert out.is_cuda and _rel_l2(out, _reference("gated_mlp", xs)) < 2e-2


def test_finite_field_on_cuda_is_bit_identical_to_numpy() -> None:
    """The verifier's torch arithmetic on the GPU gives numpy's residues, and
    the same verdicts, on every workload at full shapes."""
    import numpy as np

    from mirage_xdsl.semantics.interpreter import entry_function, run
    from mirage_xdsl.verify.equivalence import equivalent
    from mirage_xdsl.verify.finite_field import FiniteFieldDomain
    from mirage_xdsl.verify.finite_field_torch import TorchArithmetic
    from mirage_xdsl.verify.residue_arith import NUMPY
    from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS

    cuda = TorchArithmetic("cuda")

    def outputs(module, arith):
        domain = FiniteFieldDomain(5, arith)
        rng = np.random.default_rng(5)
        types = entry_function(module).function_type.inputs.data
        xs = [domain.random(rng, tuple(t.get_shape())) for t in types]
        return [domain.to_numpy(v)[0] for v in run(module, xs, domain)]

    for workload, build in HANDWRITTEN.values():
        for module in (WORKLOADS[workload].module(8), build(8)):
            want, got = outputs(module, NUMPY), outputs(module, cuda)
            assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))
        assert equivalent(WORKLOADS[workload].module(8), build(8), arith=cuda)


def test_softmax_attention_at_natural_scale_runs_on_cuda_tensors() -> None:
    """``torch.softmax`` captures as the safe form (row maximum subtracted), so
    torch.randn inputs, unshrunk, give Q·K logits that overflow exp() in fp16
    without the shift, and the result still matches torch in fp32."""

    def attention(q, k, v):  # K given as [heads, d, keys]
        return torch.softmax(q @ k, dim=-1) @ v

    def inputs(seed: int) -> list[torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        shapes = [(2, 64, 64), (2, 64, 256), (2, 256, 64)]
        return [torch.randn(s, generator=gen).half().cuda() for s in shapes]

    fn = superoptimize(attention, inputs(0), **SEARCH)
    xs = inputs(1)
    logits = xs[0].float() @ xs[1].float()
    assert torch.isinf(logits.half().exp()).any()  # the plain form would overflow
    out, ref = fn(*xs), attention(*[x.float() for x in xs])
    assert not torch.isnan(out).any()
    assert _rel_l2(out, ref) < 2e-2


def test_decoder_layer_at_natural_scale_runs_on_cuda_tensors() -> None:
    """A Llama-style layer written the usual way (RMSNorm with weight and eps,
    grouped q/k/v projections, SDPA, residuals, SiLU-gated MLP) captures,
    is searched segment by segment, compiles and matches torch in fp32 on
    unshrunk torch.randn inputs, with logits large enough that the plain
    exp/sum softmax would overflow fp16."""
    from mirage_xdsl.torch.models import DecoderLayer, trained

    layer = trained(DecoderLayer(dim=256, heads=4, kv_heads=2, hidden=512), qk_gain=4)
    layer = layer.half().cuda().eval()
    x = torch.randn(1, 64, 256, device="cuda").half()
    with torch.no_grad():
        fn = superoptimize(layer, [x], **SEARCH)
        names = [op.name for op in fn.module.walk()]
        assert "kernel.transpose" in names and "kernel.customized" in names
        h = layer.attention_norm(x)
        q = layer.wq(h).view(1, 64, 4, 64).transpose(1, 2).float()
        k = layer.wk(h).view(1, 64, 2, 64).transpose(1, 2).float()
        logits = q @ k.repeat_interleave(2, dim=1).transpose(2, 3) / 8
        assert torch.isinf(logits.half().exp()).any()  # the plain form overflows
        out, ref = fn(x), layer.float()(x.float())
        assert torch.isfinite(out).all()
        assert _rel_l2(out, ref) < 2e-2


def test_kernel_profile_counts_each_calls_kernels_in_order() -> None:
    from mirage_xdsl.runtime.kernel_profile import kernel_profile

    a = torch.randn(256, 256, device="cuda")

    def call():
        return (a @ a).relu() + 1

    profile = kernel_profile(call, calls=3)
    # the matmul (one cuBLAS kernel or more), the relu and the add, per
    # call: the flushes between calls left out
    assert profile.launches == len(profile.sequence) >= 3 and profile.us > 0
    assert not any("Fill" in name for name, _ in profile.sequence)


def test_a_training_step_on_cuda_gets_eagers_gradients(caplog) -> None:
    """On CUDA tensors too: the µGraph's kernels run forward (its glue
    eagerly), and each part's backward runs it again as torch."""
    from test_torch_backend import GatedMLP

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = GatedMLP().cuda()
    x = torch.randn(16, 8, device="cuda", requires_grad=True)
    model(x).square().sum().backward()
    want = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    compiled = torch.compile(model, backend="mirage", options=SEARCH)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        compiled(x).square().sum().backward()
    torch._dynamo.reset()
    log = [r.message for r in caplog.records]
    assert any(re.search(r"ops as 1 µGraphs", m) for m in log)
    assert any("glue runs eagerly: it records gradients" in m for m in log)
    assert not any("runs as torch" in m for m in log)
    got = [p.grad for p in model.parameters()] + [x.grad]
    for g, w in zip(got, want, strict=True):
        assert _rel_l2(g, w) < 2e-2
