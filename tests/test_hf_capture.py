"""transformers models as users bring them: their blocks capture unmodified
and the captured programs match torch through the interpreter."""

import inspect

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hf_configs import gpt2_config, llama_config  # noqa: E402
from transformers.models.gpt2 import modeling_gpt2  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402

from mirage_xdsl.torch import CaptureError, MirageFunction, capture_program  # noqa: E402

TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3}


def randomised(module, dtype):
    """``module`` in ``dtype`` with every parameter random (norm weights
    around one), so a weight is a real multiply."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            p.copy_(1 + 0.3 * noise if "norm" in name or "ln_" in name else 0.2 * noise)
    return module.to(dtype).eval()


def rotary(config, x, seq):
    rope = modeling_llama.LlamaRotaryEmbedding(config)
    cos, sin = rope(x, torch.arange(seq)[None])
    return cos.to(x.dtype), sin.to(x.dtype)


def blocks(dtype):
    """name -> (function of tensors, example inputs)."""
    config = llama_config()
    x = torch.randn(1, 8, 64, generator=torch.Generator().manual_seed(1)).to(dtype)
    cos, sin = rotary(config, x, 8)
    norm = randomised(modeling_llama.LlamaRMSNorm(64, eps=1e-6), dtype)
    mlp = randomised(modeling_llama.LlamaMLP(config), dtype)
    attention = randomised(modeling_llama.LlamaAttention(config, 0), dtype)
    layer = randomised(modeling_llama.LlamaDecoderLayer(config, 0), dtype)
    block = randomised(modeling_gpt2.GPT2Block(gpt2_config(), 0), dtype)

    def attend(h, c, s):  # no mask: causal, as transformers asks of SDPA
        return attention(h, (c, s), None)[0]

    def decode(h, c, s):
        return layer(h, position_embeddings=(c, s))

    def gpt2(h):
        out = block(h)
        return out[0] if isinstance(out, tuple) else out

    return {
        "LlamaRMSNorm": (norm, [x]),
        "LlamaMLP": (mlp, [x]),
        "LlamaAttention": (attend, [x, cos, sin]),
        "LlamaDecoderLayer": (decode, [x, cos, sin]),
        "GPT2Block": (gpt2, [x]),
    }


def rel_err(out, ref):
    return float((out.float() - ref.float()).norm() / ref.float().norm())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(blocks(torch.float32)))
def test_block_captures_unmodified_and_matches_torch(name, dtype):
    fn, xs = blocks(dtype)[name]
    captured = capture_program(fn, xs)
    with torch.no_grad():
        out, ref = MirageFunction(captured)(*xs), fn(*xs)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    assert rel_err(out, ref) < TOLERANCE[dtype]


def test_attention_is_causal():
    """Changing a later position must not change an earlier output."""
    fn, (x, cos, sin) = blocks(torch.float32)["LlamaAttention"]
    run = MirageFunction(capture_program(fn, [x, cos, sin]))
    later = x.clone()
    later[:, -1] += 1.0
    with torch.no_grad():
        a, b = run(x, cos, sin), run(later, cos, sin)
    torch.testing.assert_close(a[:, :-1], b[:, :-1])
    assert not torch.allclose(a[:, -1], b[:, -1])


def test_int64_input_is_named_at_the_call():
    embed = torch.nn.Embedding(16, 8)

    def lookup(ids):
        return embed(ids)

    with pytest.raises(CaptureError) as e:
        capture_program(lookup, [torch.tensor([[1, 2]])])
    message = str(e.value)
    line = inspect.currentframe().f_lineno - 2
    assert message.startswith(
        f"{__file__}:{line}: error: input 0 ('ids') is torch.int64"
    )
    assert "\n" not in message


ROPE_INPUTS = (torch.randn(1, 4, 64), torch.arange(4.0)[None])


def test_library_refusal_points_at_the_users_call():
    rope = modeling_llama.LlamaRotaryEmbedding(llama_config())
    with pytest.raises(CaptureError) as e:
        capture_program(rope, ROPE_INPUTS)
    message = str(e.value)
    line = inspect.currentframe().f_lineno - 2
    assert message.startswith(f"{__file__}:{line}: error: torch op 'aten.cos'")
    assert "at transformers/models/llama/modeling_llama.py:" in message
    assert "\n" not in message


def test_refusal_in_library_code_called_by_user_code_names_both_lines():
    rope = modeling_llama.LlamaRotaryEmbedding(llama_config())

    def tables(x, positions):
        return rope(x, positions)[0]

    with pytest.raises(CaptureError) as e:
        capture_program(tables, ROPE_INPUTS)
    message = str(e.value)
    line = inspect.getsourcelines(tables)[1] + 1
    assert message.startswith(f"{__file__}:{line}:16: error: torch op 'aten.cos'")
    assert (
        "(in `return rope(x, positions)[0]`, at transformers/models/llama/" in message
    )
    assert "\n" not in message


def test_rotate_half_is_slices_a_negation_and_a_concat():
    """The q/k/v projection (one matmul, three kernel.slice of it), the output
    projection, scores and probabilities times values are the matmuls; each
    rotate_half is two kernel.slice and a kernel.concat."""
    fn, xs = blocks(torch.float32)["LlamaAttention"]
    module = capture_program(fn, xs).module
    ops = [op.name for op in module.walk() if op.name.startswith("kernel.")]
    assert ops.count("kernel.matmul") == 2 + 2
    assert ops.count("kernel.slice") == 3 + 2 * 2 and ops.count("kernel.concat") == 2
