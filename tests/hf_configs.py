"""Tiny transformers configs the Hugging Face tests share: the shapes of a
Llama with grouped key/value heads and of a GPT-2, small enough for the CPU."""

from __future__ import annotations

from transformers import GPT2Config, LlamaConfig, MixtralConfig, Phi3Config

TINY = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}
LAYERS = 2


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
