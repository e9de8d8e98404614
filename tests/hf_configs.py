"""Tiny transformers configs the Hugging Face tests share: the shapes of a
Llama with grouped key/value heads and of a GPT-2, small enough for the CPU;
and the backend's warnings among a test's log records."""

from __future__ import annotations

import logging

import transformers
from transformers import GPT2Config, LlamaConfig, MixtralConfig, Phi3Config

TINY = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}
LAYERS = 2


def backend_warnings(records: list[logging.LogRecord]) -> list[str]:
    """The warnings the backend logged. transformers logs its own about the
    tiny configs (a YaRN factor that does not match the context lengths),
    once per process, so whether they fall inside a test depends on what ran
    before it."""
    return [
        r.getMessage()
        for r in records
        if r.levelno >= logging.WARNING and r.name.startswith("mirage_xdsl")
    ]


def llama_config(**overrides) -> LlamaConfig:
    """A two-layer Llama of hidden size 64 over a vocabulary of 128."""
    shape = dict(TINY, intermediate_size=128, num_hidden_layers=LAYERS, vocab_size=128)
    return LlamaConfig(**shape, attn_implementation="sdpa", **overrides)


def phi3_config() -> Phi3Config:
    """A two-layer Phi-3 (one fused q/k/v projection sliced apart, one fused
    gate/up projection chunked) of the same shapes."""
    shape = dict(TINY, intermediate_size=128, num_hidden_layers=LAYERS, vocab_size=128)
    return Phi3Config(
        **shape,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="sdpa",
    )


def gpt2_config() -> GPT2Config:
    """A two-layer GPT-2 of width 64 over a vocabulary of 128."""
    return GPT2Config(
        n_embd=64,
        n_layer=LAYERS,
        n_head=4,
        vocab_size=128,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="sdpa",
    )


def mixtral_config() -> MixtralConfig:
    """A two-layer Mixtral of the same shapes: 4 experts, 2 of them a token."""
    shape = dict(TINY, intermediate_size=128, num_hidden_layers=LAYERS, vocab_size=128)
    return MixtralConfig(
        **shape,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=128,
        attn_implementation="sdpa",
    )


FAMILIES = {
    # name: (config class, what its code does that a Llama's does not)
    "gemma": ("GemmaConfig", "norm weight as 1 + w in fp32, output.type_as(x)"),
    "cohere": (
        "CohereConfig",
        "LayerNorm written out, x - mean computed twice; interleaved rotary "
        "(repeat_interleave, stack, strided slices)",
    ),
    "gptj": ("GPTJConfig", "interleaved rotary on part of each head, parallel MLP"),
    "falcon": ("FalconConfig", "one key/value head that SDPA broadcasts"),
    "qwen3": ("Qwen3Config", "RMSNorm of each head's queries and keys"),
    "gemma2": ("Gemma2Config", "logit soft-capping, norms after each block"),
    "phi3": ("Phi3Config", "an empty slice where the rotation spans the head"),
    "bloom": ("BloomConfig", "ALiBi: scores as baddbmm of the bias table"),
    "gpt_oss": ("GptOssConfig", "gate and up clamped, experts routed by topk"),
    "diffllama": ("DiffLlamaConfig", "exp(sum(q1 * k1, dtype=float32)) weights"),
    "deepseek_v3": (
        "DeepseekV3Config",
        "latent attention: keys built in new_empty by two slice copy_s",
    ),
    "deepseek_v2": ("DeepseekV2Config", "rotary as a complex product"),
}
"""Decoder families beyond Llama whose code uses other forms of the same ops."""

ROUTING = {"deepseek_v3": ("scores_for_choice", "group_mask")}
"""Per family, the names on the lines of its mixture of experts' routing that
stay torch besides ``topk`` (DeepSeek masks the scores of the groups not
chosen with ``-inf`` before choosing experts)."""


def family_config(name: str):
    """A two-layer config of ``name`` (:data:`FAMILIES`) with the shared tiny
    shapes, and sdpa attention where the family has it."""
    cls = getattr(transformers, FAMILIES[name][0])
    common = dict(vocab_size=128, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    if name == "gptj":
        shape = dict(n_embd=64, n_layer=LAYERS, n_head=4, n_positions=128, rotary_dim=8)
    elif name == "bloom":
        shape = dict(hidden_size=64, n_layer=LAYERS, n_head=4)
    elif name == "falcon":
        shape = dict(hidden_size=64, num_hidden_layers=LAYERS, num_attention_heads=4)
        shape.update(new_decoder_architecture=False, multi_query=True)
    else:
        shape = dict(TINY, intermediate_size=128, num_hidden_layers=LAYERS)
        shape.update(max_position_embeddings=128, head_dim=16)
    if name == "gpt_oss":
        shape.update(num_local_experts=4, num_experts_per_tok=2)
    if name.startswith("deepseek"):
        shape.update(num_key_value_heads=4, head_dim=8, qk_rope_head_dim=8)
        shape.update(kv_lora_rank=32, q_lora_rank=48, qk_nope_head_dim=16)
        shape.update(v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2)
        shape.update(first_k_dense_replace=1, moe_intermediate_size=32)
    if name == "deepseek_v3":
        shape.update(n_group=1, topk_group=1)
    # no SDPA path: soft-capping, ALiBi, attention sinks; GPT-J before
    # transformers 5.2x
    eager = name in ("gemma2", "bloom", "gptj", "gpt_oss")
    return cls(**shape, **common, attn_implementation="eager" if eager else "sdpa")


ENCODERS = {
    # name: (config class, what its code does)
    "bert": ("BertConfig", "LayerNorm, GELU, a padding mask added to the scores"),
    "modernbert": ("ModernBertConfig", "q, k, v = qkv.unbind(-3), GeGLU, rotary"),
    "deberta": ("DebertaV2Config", "scores.masked_fill(~mask, finfo.min)"),
}
"""Encoders whose attention reads a padding mask."""


VISION = {
    # name: (config class, what its code does)
    "vit": ("ViTConfig", "a patch embedding: Conv2d with its stride its kernel"),
    "siglip": (
        "SiglipVisionConfig",
        "patches with padding='valid', a probe repeated over the batch",
    ),
}
"""Vision encoders: images cut into patches by a convolution."""


def vision_config(name: str):
    """A two-layer config of vision encoder ``name`` (:data:`VISION`) for
    32 x 32 images in patches of 8."""
    cls = getattr(transformers, VISION[name][0])
    shape = dict(TINY, intermediate_size=128, num_hidden_layers=LAYERS)
    shape.pop("num_key_value_heads")
    return cls(**shape, image_size=32, patch_size=8)


def encoder_config(name: str):
    """A two-layer config of encoder ``name`` (:data:`ENCODERS`)."""
    cls = getattr(transformers, ENCODERS[name][0])
    shape = dict(TINY, intermediate_size=128, num_hidden_layers=LAYERS)
    shape.pop("num_key_value_heads")
    ids = dict(vocab_size=128, pad_token_id=0)
    if name == "modernbert":
        ids.update(bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)
        shape.update(global_attn_every_n_layers=1)
    return cls(**shape, **ids)
