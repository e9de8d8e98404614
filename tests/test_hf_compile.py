"""``torch.compile(LlamaForCausalLM, backend="mirage")`` on CPU through the
interpreter: greedy tokens equal eager's, and the log accounts for every
norm, projection, attention and MLP."""

import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hf_configs import (  # noqa: E402
    LAYERS,
    backend_warnings,
    gpt2_config,
    llama_config,
    mixtral_config,
    phi3_config,
)
from transformers import LlamaForCausalLM, StaticCache  # noqa: E402

INTERPRET = {"cpu": "interpret", "superoptimize": False}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def tiny_llama(dtype, **overrides):
    config = llama_config(max_position_embeddings=128, **overrides)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).to(dtype).eval()


def greedy(model, forward, steps, prompt=(1, 5, 9, 3, 7)):
    """``steps`` greedy tokens with a static KV cache."""
    cache = StaticCache(config=model.config, max_cache_len=64)
    tokens = torch.tensor([prompt])
    position = torch.arange(len(prompt))
    out = []
    with torch.no_grad():
        for _ in range(steps):
            logits = forward(
                input_ids=tokens,
                past_key_values=cache,
                cache_position=position,
                use_cache=True,
            ).logits
            tokens = logits[:, -1:].argmax(-1)
            position = position[-1:] + 1
            out.append(int(tokens))
    return out


def compiled_tokens(model, steps, caplog, **options):
    compiled = torch.compile(
        model, backend="mirage", dynamic=False, options={**INTERPRET, **options}
    )
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        tokens = greedy(model, compiled, steps)
    assert not backend_warnings(caplog.records)
    return tokens


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_greedy_tokens_match_eager(dtype, caplog):
    model = tiny_llama(dtype)
    steps = 32 if dtype == torch.float32 else 8
    assert compiled_tokens(model, steps, caplog) == greedy(model, model, steps)


def test_phi3_tokens_match_eager(caplog):
    """Phi-3's fused projections split the graph so that partitioning runs
    more than one round; each part still runs as its own µGraph (two parts
    once shared a name, and so one part's call ran the other's program)."""
    from transformers import Phi3ForCausalLM

    torch.manual_seed(0)
    model = Phi3ForCausalLM(phi3_config()).eval()
    assert compiled_tokens(model, 3, caplog) == greedy(model, model, 3)
    names = {
        m.split()[1] for m in caplog.messages if re.match(r"mirage: {3}\S+ is @", m)
    }
    assert len(names) >= 4 and all(re.fullmatch(r"mirage_\d+", n) for n in names)


@pytest.mark.slow
def test_a_mixture_of_experts_gives_eager_tokens(caplog):
    """Mixtral: the router's top-k and the gathers of each expert's tokens
    stay torch, the experts' projections and the attention are µGraphs."""
    from transformers import MixtralForCausalLM

    torch.manual_seed(0)
    model = MixtralForCausalLM(mixtral_config()).eval()
    assert compiled_tokens(model, 4, caplog) == greedy(model, model, 4)
    log = caplog.messages
    assert any(re.search(r"torch  aten\.topk ", m) for m in log)
    assert any(re.search(r"mirage_\d+  aten\.linear ", m) for m in log)


@pytest.mark.slow
def test_prompts_of_other_lengths_keep_their_parts_as_mugraphs(caplog):
    """Without ``dynamic=False``, Dynamo traces the graph again with symbolic
    sizes once a prompt of another length comes; each length is then built
    on its own, its parts still µGraphs (torch.export once refused the
    symbolic graph, and the whole step ran as torch)."""
    model = tiny_llama(torch.float32)
    compiled = torch.compile(model, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        for prompt in ((1, 5, 9, 3, 7), (4, 8, 2)):
            got = greedy(model, compiled, 3, prompt)
            assert got == greedy(model, model, 3, prompt)
    assert not backend_warnings(caplog.records)
    assert any("has dynamic shapes" in m for m in caplog.messages)
    built = [m for m in caplog.messages if re.search(r"graph \d+: \d+ ops as", m)]
    assert len(built) >= 3
    assert all(not re.search(r"ops as 0 µGraphs", m) for m in built)


def test_a_left_padded_batch_generates_eager_tokens(caplog):
    """``generate`` on two prompts, one left-padded, through the compiled
    forward: the padded positions' query rows have every key masked, which
    torch's SDPA makes 0 (a NaN there once reached every later position of
    the padded prompt and made its tokens the pad)."""
    model = tiny_llama(torch.float32, pad_token_id=0)
    ids = torch.tensor([[0, 0, 5, 9, 3, 7], [4, 8, 5, 9, 3, 7]])
    options = dict(
        attention_mask=(ids != 0).long(),
        max_new_tokens=6,
        do_sample=False,
        cache_implementation="static",
    )
    eager = model.generate(ids, **options)
    model.forward = torch.compile(
        model.forward, backend="mirage", dynamic=False, options=INTERPRET
    )
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        compiled = model.generate(ids, **options)
    assert not backend_warnings(caplog.records)
    assert compiled.tolist() == eager.tolist()


OPS_IN_MIRAGE = {
    # op: (count per graph, the model code it comes from)
    "aten.rsqrt": (2 * LAYERS + 1, ("torch.rsqrt(variance",)),
    "aten.linear": (7 * LAYERS + 1, ("_proj(", "lm_head(")),
    "aten.scaled_dot_product_attention": (LAYERS, ("scaled_dot_product_attention(",)),
    "aten.silu": (LAYERS, ("silu(",)),
}


def test_log_accounts_for_every_norm_projection_attention_and_mlp(caplog):
    compiled_tokens(tiny_llama(torch.float32), 2, caplog)
    log = [r.message for r in caplog.records if r.name == "mirage_xdsl.torch"]
    summaries = [m for m in log if re.search(r"graph \d+: \d+ ops as", m)]
    assert len(summaries) == 2  # prefill and decode
    lines = [m.split(None, 3) for m in log if m.startswith("mirage:   ")]
    for op, (count, source) in OPS_IN_MIRAGE.items():
        taken = [where for _, part, name, where in lines if name == op]
        assert len(taken) == 2 * count, op
        assert all(any(s in w for s in source) for w in taken), op
        assert not any(name == op for _, part, name, _ in lines if part == "torch")
    assert all(part.startswith("mirage_") or part == "torch" for _, part, _, _ in lines)
    cache_writes = [w for _, part, name, w in lines if name == "aten.index_copy_"]
    assert len(cache_writes) == 2 * 2 * LAYERS
    assert all("in-place op" in w for w in cache_writes)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "cohere"])
def test_every_part_runs_as_triton_kernels(family):
    """The generated Triton kernels of each part (prefill and decode, f16)
    match the interpreter, in Triton's CPU interpreter (Cohere: its written
    LayerNorm and interleaved rotary's stacks and selection matrices)."""
    pytest.importorskip("triton")
    script = Path(__file__).with_name("hf_triton_interpret.py")
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            "float16",
            *([family] if family != "llama" else []),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    results = [
        json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")
    ]
    assert len({r["case"] for r in results}) >= 3, done.stderr[-2000:]
    for r in results:
        assert "error" not in r, r
        assert max(r["errors"]) < 5e-3, r


def test_gpt2_logits_match_eager(caplog):
    from transformers import GPT2LMHeadModel

    config = gpt2_config()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval()
    ids = torch.tensor([[1, 5, 9, 3]])
    compiled = torch.compile(model, backend="mirage", dynamic=False, options=INTERPRET)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(ids).logits, model(ids).logits)
    log = [r.message for r in caplog.records if r.name == "mirage_xdsl.torch"]
    ops = [m.split(None, 3)[1:3] for m in log if m.startswith("mirage:   ")]
    for op in ("aten.layer_norm", "aten.addmm", "aten.scaled_dot_product_attention"):
        assert [part for part, name in ops if name == op], op
        assert all(part != "torch" for part, name in ops if name == op), op


@pytest.mark.slow
def test_searched_parts_give_eager_tokens(caplog):
    """Every part searched (a few seconds each), then run in the interpreter."""
    model = tiny_llama(torch.float16)
    options = {"cpu": "interpret", "budget": 5, "jobs": 1, "cache_dir": "none"}
    compiled = torch.compile(model, backend="mirage", dynamic=False, options=options)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        tokens = greedy(model, compiled, 3)
    assert not backend_warnings(caplog.records)
    assert tokens == greedy(model, model, 3)


STAYS_TORCH = {
    # the ops of a model's own code that may stay torch: lookups, tables, and
    # index math (the mask's and the cache's are in transformers' utilities)
    "aten.embedding",
    "aten.cos",
    "aten.sin",
    "aten.arange",
    "aten.zeros",
    "aten.index",
    "aten.gather",  # BERT's token type ids
    "aten.lift_fresh_copy",
    "aten.full",  # BLOOM's ALiBi slopes
    "aten.topk",  # a mixture of experts' choice of experts
    "aten.zeros_like",  # and DeepSeek's mask of the groups chosen
    "aten.polar",  # a table of rotations as complex numbers,
    "aten.ones_like",
    "aten.view_as_real",  # read as real pairs
}
ALLOWED_REASONS = (
    "torch.int",
    "torch.complex",  # the rotations' table, scaled or moved
    "an in-place op",
    "only layout changes",
)


def check_float_math_ran_as_mugraphs(caplog, routing: tuple[str, ...] = ()) -> None:
    """The backend's log: of the model's own code (``modeling_*.py``), only
    the ops of :data:`STAYS_TORCH`, integer math, in-place writes, parts of
    layout changes and lines naming one of ``routing`` alone stayed torch,
    and its linears ran as µGraphs."""
    lines = [m.split(None, 3) for m in caplog.messages if m.startswith("mirage:   ")]
    kept = [
        (op, where)
        for _, part, op, where in lines
        if part == "torch"
        and "/modeling_" in where
        and op not in STAYS_TORCH
        and not any(r in where for r in (*ALLOWED_REASONS, *routing))
    ]
    assert not kept, kept
    assert any(
        part.startswith("mirage_") and op == "aten.linear" for _, part, op, _ in lines
    )


@pytest.mark.parametrize(
    "family",
    [
        "gemma",
        "cohere",
        *(pytest.param(f, marks=pytest.mark.slow) for f in ("gptj", "falcon")),
        *(pytest.param(f, marks=pytest.mark.slow) for f in ("qwen3", "gemma2")),
        *(pytest.param(f, marks=pytest.mark.slow) for f in ("phi3", "bloom")),
        *(pytest.param(f, marks=pytest.mark.slow) for f in ("gpt_oss", "diffllama")),
        *(
            pytest.param(f, marks=pytest.mark.slow)
            for f in ("deepseek_v3", "deepseek_v2")
        ),
    ],
)
def test_other_decoder_families_run_their_float_math_as_mugraphs(
    family, caplog, tmp_path
):
    """Each family's norms, projections, rotary embeddings, attention and MLP
    run as µGraphs, and its greedy tokens are eager's: of the model's own code,
    only integer math, lookups and the cos/sin tables stay torch. Each part
    lowers to Triton, as on a GPU (Gemma's embedding scale, a 0-d tensor,
    once failed there)."""
    from hf_configs import ROUTING, family_config
    from transformers import AutoModelForCausalLM

    from mirage_xdsl.ir.context import make_context
    from mirage_xdsl.ir.diagnostics import parse
    from mirage_xdsl.lowering.triton import generate_triton

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(family_config(family)).eval()
    tokens = compiled_tokens(model, 3, caplog, dump_dir=tmp_path)
    assert tokens == greedy(model, model, 3)
    check_float_math_ran_as_mugraphs(caplog, ROUTING.get(family, ()))
    parts = sorted(tmp_path.glob("part_*.mlir"))
    assert parts
    for path in parts:
        assert generate_triton(parse(make_context(), path.read_text(), str(path)))


@pytest.mark.parametrize(
    "name",
    [
        "bert",
        *(pytest.param(f, marks=pytest.mark.slow) for f in ("modernbert", "deberta")),
    ],
)
def test_encoders_on_a_padded_batch_match_eager_as_mugraphs(name, caplog):
    """An encoder's output on a padded batch is eager's, and of its own code
    only lookups, tables and integer math (the mask's) stay torch."""
    from hf_configs import encoder_config
    from transformers import AutoModel

    torch.manual_seed(0)
    model = AutoModel.from_config(encoder_config(name)).eval()
    ids = torch.randint(3, 128, (2, 7), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 5:] = 0
    compiled = torch.compile(model, backend="mirage", options=INTERPRET)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(input_ids=ids, attention_mask=mask).last_hidden_state
        ref = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert float((out - ref).norm() / ref.norm()) < 1e-5
    check_float_math_ran_as_mugraphs(caplog)


@pytest.mark.parametrize("name", ["vit", "siglip"])
def test_vision_encoders_match_eager_as_one_mugraph(name, caplog):
    """A vision encoder, its patch embedding's convolution included, is one
    µGraph: of its own code only layout changes stay torch."""
    from hf_configs import vision_config
    from transformers import AutoModel

    torch.manual_seed(0)
    model = AutoModel.from_config(vision_config(name)).eval()
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    compiled = torch.compile(model, backend="mirage", options=INTERPRET)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(pixel_values=pixels).last_hidden_state
        ref = model(pixel_values=pixels).last_hidden_state
    assert float((out - ref).norm() / ref.norm()) < 1e-5
    check_float_math_ran_as_mugraphs(caplog)
    assert any(re.search(r"ops as 1 µGraphs", m) for m in caplog.messages)


def kept_in_torch(caplog) -> set[str]:
    """The ops the backend's log says stayed torch."""
    lines = [m.split(None, 3) for m in caplog.messages if m.startswith("mirage:   ")]
    return {op for _, part, op, _ in lines if part == "torch"}


@pytest.mark.slow
def test_mamba_runs_its_convolution_and_step_size_as_mugraphs(caplog):
    """Mamba's depthwise causal convolution and ``softplus`` step size run
    in µGraphs; its reference scan's ``torch.vmap`` stays torch (once, the
    forward failed there)."""
    from transformers import MambaConfig, MambaModel

    torch.manual_seed(0)
    config = MambaConfig(
        vocab_size=128, hidden_size=64, state_size=8, num_hidden_layers=2
    )
    model = MambaModel(config).eval()
    ids = torch.randint(3, 128, (2, 7), generator=torch.Generator().manual_seed(1))
    compiled = torch.compile(model, backend="mirage", options=INTERPRET)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(input_ids=ids).last_hidden_state
        ref = model(input_ids=ids).last_hidden_state
    assert float((out - ref).norm() / ref.norm()) < 1e-5
    assert not backend_warnings(caplog.records)
    assert not kept_in_torch(caplog) & {"aten.conv1d", "aten.softplus"}
    assert any("inside torch.vmap" in m for m in caplog.messages)


@pytest.mark.slow
def test_whisper_is_one_mugraph_with_its_convolutions(caplog):
    from transformers import WhisperConfig, WhisperModel

    torch.manual_seed(0)
    config = WhisperConfig(
        vocab_size=128,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        num_mel_bins=16,
        max_source_positions=16,
        pad_token_id=0,
        decoder_start_token_id=1,
        bos_token_id=1,
        eos_token_id=2,
    )
    model = WhisperModel(config).eval()
    g = torch.Generator().manual_seed(1)
    features = torch.randn(2, 16, 32, generator=g)
    ids = torch.randint(3, 128, (2, 5), generator=g)
    compiled = torch.compile(model, backend="mirage", options=INTERPRET)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(input_features=features, decoder_input_ids=ids)
        ref = model(input_features=features, decoder_input_ids=ids)
    for got, want in (
        (out.last_hidden_state, ref.last_hidden_state),
        (out.encoder_last_hidden_state, ref.encoder_last_hidden_state),
    ):
        assert float((got - want).norm() / want.norm()) < 1e-5
    assert not backend_warnings(caplog.records)
    assert "aten.conv1d" not in kept_in_torch(caplog)
    assert any(re.search(r"ops as 1 µGraphs", m) for m in caplog.messages)


@pytest.mark.slow  # the counters' rewrite alone: tests/test_increments.py
def test_inductor_glue_gives_eager_tokens_with_one_bump_of_the_counters(monkeypatch):
    """Through Inductor's glue (the CUDA default), a static cache's length
    counters, one a layer, are bumped by one ``_foreach_add_`` in the decode
    step's graph (``increments.py``), and the tokens are eager's."""
    from test_torch_backend import spy_inductor

    graphs = spy_inductor(monkeypatch)
    model = tiny_llama(torch.float32)
    options = {**INTERPRET, "glue": "inductor"}
    compiled = torch.compile(model, backend="mirage", dynamic=False, options=options)
    assert greedy(model, compiled, 4) == greedy(model, model, 4)
    foreach = torch.ops.aten._foreach_add_.Scalar
    bumps = [
        len(n.args[0]) for g in graphs for n in g.graph.nodes if n.target is foreach
    ]
    assert LAYERS in bumps
