"""transformers families on CUDA: their µGraphs run as our kernels.

The CPU tests (``test_hf_compile.py``) run each part in the interpreter; here
the same parts are built for the GPU (the default build: the search's
own runs on CUDA are ``test_torch_gpu.py``'s), so the ops other families bring (``type_as``, a LayerNorm written
out, interleaved rotary's stacks and selection matrices, ``unbind``, a
masked fill) run as Triton kernels. Skipped, with the reason, without a GPU.
"""

from __future__ import annotations

import logging

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hf_configs import backend_warnings, encoder_config, family_config  # noqa: E402
from transformers import AutoModel, AutoModelForCausalLM, StaticCache  # noqa: E402

from mirage_xdsl.runtime.driver import gpu_unavailable_reason  # noqa: E402

REASON = gpu_unavailable_reason() or (
    None if torch.cuda.is_available() else "torch sees no CUDA device"
)
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(REASON is not None, reason=f"{REASON}"),
]

DEFAULT_BUILD = {"superoptimize": False}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref.float()).norm() / ref.float().norm())


def step_logits(model, forward, tokens: list[list[int]]) -> list[torch.Tensor]:
    """The last position's logits after a prompt, then after each next token,
    through a static cache."""
    cache = StaticCache(config=model.config, max_cache_len=32)
    out, position = [], 0
    with torch.no_grad():
        for chunk in tokens:
            ids = torch.tensor([chunk], device="cuda")
            positions = torch.arange(position, position + len(chunk), device="cuda")
            logits = forward(
                input_ids=ids, past_key_values=cache, cache_position=positions
            ).logits
            out.append(logits[0, -1].float())
            position += len(chunk)
    return out


@pytest.mark.parametrize("family", ["gemma", "cohere", "gptj", "falcon"])
def test_decoder_family_runs_as_mirage_kernels_on_cuda(family, caplog):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(family_config(family))
    model = model.to("cuda", torch.float16).eval()
    compiled = torch.compile(
        model, backend="mirage", dynamic=False, options=DEFAULT_BUILD
    )
    tokens = [[1, 5, 9, 3, 7], [11], [4]]
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        got = step_logits(model, compiled, tokens)
    want = step_logits(model, model, tokens)
    assert not backend_warnings(caplog.records)
    assert any("µGraphs" in m and "as 0 µGraphs" not in m for m in caplog.messages)
    for g, w in zip(got, want, strict=True):
        assert rel(g, w) < 1e-2


@pytest.mark.parametrize("name", ["modernbert", "deberta"])
def test_encoder_runs_as_mirage_kernels_on_cuda(name, caplog):
    torch.manual_seed(0)
    model = AutoModel.from_config(encoder_config(name)).to("cuda", torch.float16)
    model = model.eval()
    ids = torch.randint(3, 128, (2, 7), device="cuda")
    mask = torch.ones(2, 7, dtype=torch.long, device="cuda")
    mask[1, 5:] = 0
    compiled = torch.compile(model, backend="mirage", options=DEFAULT_BUILD)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(input_ids=ids, attention_mask=mask).last_hidden_state
        ref = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert not backend_warnings(caplog.records)
    assert rel(out, ref) < 1e-2
