#!/usr/bin/env python3
"""A transformers Llama, compiled with ``torch.compile(backend="mirage")``.

Builds ``LlamaForCausalLM`` from a Llama-3.2-1B-shaped config (random weights,
nothing downloaded), compiles it with the mirage backend, generates greedily
with a static KV cache and compares the tokens with eager torch. On CUDA it
then times one decode step (one token) of each method: eager,
``torch.compile`` (default and max-autotune, without inductor's own CUDA
graphs, since the step is captured in one here), and mirage; and prints the
floor: the bytes a step must read (every weight once and the whole static
cache) over the copy bandwidth measured in the same run. The KV-cache write
stays torch between µGraphs (``StaticCache.update``: position arithmetic and
two ``index_copy_`` per layer); its cost per token is timed alone on a cache
of the model's shapes and printed beside the steps. ``--family qwen2`` does
the same for a ``Qwen2ForCausalLM`` of Qwen2.5-0.5B's shapes (other widths,
7 query heads a key head, biased q/k/v projections).

How a step is timed (as ``tools/bench.py`` times a call): the step captured
in a CUDA graph (plain calls if it cannot be captured, said so), warm-up
replays, then per repetition a 256 MB write to flush L2 and CUDA events around
one replay; the median is printed.

    pip install -e ".[hf]"
    python examples/hf_llama.py --small --device cpu           # µGraphs in the interpreter
    python examples/hf_llama.py --budget 10                    # Llama-3.2-1B shapes, all four
    python examples/hf_llama.py --methods eager,mirage --budget 0   # no search: as captured
    python examples/hf_llama.py --profile 12                   # and each one's longest kernels
    python examples/hf_llama.py --family qwen2 --budget 10     # Qwen2.5-0.5B shapes

The ``mirage_xdsl.torch`` log (``--log``) lists, per graph Dynamo traced,
every op with its line in transformers: the µGraph that took it, or why it
stays torch (embedding lookup, integer index math, cos/sin, KV-cache write).
"""

from __future__ import annotations

import argparse
import inspect
import logging
import statistics
import time
from collections.abc import Callable

import torch
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    Qwen2Config,
    StaticCache,
)

from mirage_xdsl.runtime.bandwidth import copy_bandwidth
from mirage_xdsl.runtime.kernel_profile import Profile, kernel_profile

FLUSH_BYTES = 256 << 20
CACHE_KEYWORD = (
    "cache"
    if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters
    else "past_key_values"
)
"""The forward's keyword for the KV cache: ``cache`` from transformers 5.24
on (``past_key_values`` is deprecated there), ``past_key_values`` before."""


TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=128,
)
"""The tiny shapes of ``--small``, whichever the family."""


def shapes(
    layers: int, hidden: int, mlp: int, heads: int, kv_heads: int, vocab: int
) -> dict:
    """A config's shapes, with tied embeddings (both models tie theirs)."""
    return dict(
        hidden_size=hidden,
        intermediate_size=mlp,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        vocab_size=vocab,
        tie_word_embeddings=True,
    )


def llama_config(small: bool) -> LlamaConfig:
    """Llama-3.2-1B's shapes (16 layers, hidden 2048, 32 query and 8 key/value
    heads of 64, MLP 8192, vocabulary 128256, tied embeddings), or a tiny one."""
    shape = TINY if small else shapes(16, 2048, 8192, 32, 8, 128256)
    return LlamaConfig(
        **shape,
        rms_norm_eps=1e-5,
        max_position_embeddings=8192,
        attn_implementation="sdpa",
    )


def qwen2_config(small: bool) -> Qwen2Config:
    """Qwen2.5-0.5B's shapes (24 layers, hidden 896, 14 query and 2 key/value
    heads of 64 with biased q/k/v projections, MLP 4864, vocabulary 151936,
    tied embeddings), or a tiny one: a second family, of other shapes."""
    shape = TINY if small else shapes(24, 896, 4864, 14, 2, 151936)
    return Qwen2Config(
        **shape,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        max_position_embeddings=32768,
        attn_implementation="sdpa",
    )


FAMILIES = {"llama": llama_config, "qwen2": qwen2_config}
"""``--family``: the config each builds (random weights either way)."""


class Decoder:
    """Greedy decoding of one model with its own static cache. A decode step
    reads its token and position from fixed buffers, so it can be captured in
    a CUDA graph and replayed."""

    def __init__(self, model: PreTrainedModel, forward: Callable, cache_len: int):
        device = model.device
        self.forward = forward
        self.cache = StaticCache(config=model.config, max_cache_len=cache_len)
        self.token = torch.zeros(1, 1, dtype=torch.long, device=device)
        self.position = torch.zeros(1, dtype=torch.long, device=device)
        self.logits: torch.Tensor | None = None

    def run(self, ids: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        out = self.forward(
            input_ids=ids,
            **{CACHE_KEYWORD: self.cache},
            cache_position=position,
            use_cache=True,
        )
        return out.logits[:, -1]

    def step(self) -> None:
        """One decode step on the buffered token and position."""
        self.logits = self.run(self.token, self.position)

    def generate(
        self, prompt: torch.Tensor, steps: int, forced: list[int] | None = None
    ) -> tuple[list[int], list[float]]:
        """Greedy tokens, and per step the gap between the two largest logits.
        With ``forced``, each step is fed ``forced``'s token instead of its own
        (teacher forcing), so its choices can be compared step by step."""
        with torch.no_grad():
            logits = self.run(
                prompt, torch.arange(prompt.shape[1], device=prompt.device)
            )
            tokens, gaps = [], []
            for i in range(steps):
                top = logits.float().topk(2, dim=-1).values[0]
                gaps.append(float(top[0] - top[1]))
                tokens.append(int(logits.argmax(-1)))
                self.token.fill_(tokens[-1] if forced is None else forced[i])
                self.position.fill_(prompt.shape[1] + i)
                self.step()
                logits = self.logits
        return tokens, gaps


def agreement(tokens: list[int], reference: list[int]) -> str:
    """Where free-running greedy tokens first leave eager's."""
    for i, (a, b) in enumerate(zip(tokens, reference, strict=True)):
        if a != b:
            return f"differs from eager at token {i}"
    return "same tokens as eager"


def forced_agreement(forced: list[int], reference: list[int], gaps: list[float]) -> str:
    """Step by step on eager's tokens: how many choices agree, and how close
    eager's own top two logits were where they do not. Random weights give
    nearly flat logits, so a 16-bit rounding difference can flip a near tie
    (torch.compile's own tokens leave eager's for the same reason)."""
    off = [i for i, (a, b) in enumerate(zip(forced, reference, strict=True)) if a != b]
    if not off:
        return f"all {len(forced)} choices agree"
    widest = max(gaps[i] for i in off)
    return (
        f"{len(forced) - len(off)}/{len(forced)} choices agree; where not, eager's "
        f"top two logits were within {widest:.3g} (median gap {sorted(gaps)[len(gaps) // 2]:.3g})"
    )


def time_step(decoder: Decoder, reps: int, warmup: int) -> tuple[float, bool]:
    """Median µs of one decode step, and whether it ran as a CUDA graph."""
    return time_replays(decoder.step, reps, warmup)


def time_replays(
    call: Callable[[], None], reps: int, warmup: int
) -> tuple[float, bool]:
    """Median µs of ``call`` captured in a CUDA graph (plain calls if it
    cannot be captured), L2 flushed before each, and whether it was a graph."""
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    with torch.no_grad():
        try:
            from mirage_xdsl.runtime.timer import capture_graph

            run, graph = capture_graph(call, warmup=3).replay, True
        except Exception:
            torch.cuda.synchronize()
            run, graph = call, False
        for _ in range(warmup):
            run()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for start, end in zip(starts, ends, strict=True):
            flush.fill_(1)
            start.record()
            run()
            end.record()
        torch.cuda.synchronize()
    return statistics.median(
        s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends, strict=True)
    ), graph


def cache_write_us(
    model: PreTrainedModel, cache_len: int, reps: int
) -> dict[str, float]:
    """What a decode step's KV-cache write costs when it stays torch between
    µGraphs: µs of one token's ``StaticCache.update`` for every layer (the
    position arithmetic and both ``index_copy_``), and of the ``index_copy_``
    calls alone, on a cache of the model's shapes, each timed as a step is."""
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    dtype, device = next(model.parameters()).dtype, model.device
    cache = StaticCache(config=c, max_cache_len=cache_len)
    new = [
        torch.randn(1, c.num_key_value_heads, 1, head_dim, dtype=dtype, device=device)
        for _ in range(2)
    ]
    layers = range(c.num_hidden_layers)
    with torch.no_grad():
        kv = [cache.update(*new, i) for i in layers]  # allocates the cache
    position = torch.tensor([cache_len // 2], device=device)

    def update() -> None:  # advances the cache by one token per call
        for i in layers:
            cache.update(*new, i)

    def copies() -> None:
        for k, v in kv:
            k.index_copy_(2, position, new[0])
            v.index_copy_(2, position, new[1])

    # each run of update() writes one token further: its warm-up and timed
    # replays (reps + 8) stay inside the cache, as main's --cache-len check says
    return {
        "update": time_replays(update, reps, warmup=5)[0],
        "index_copy_": time_replays(copies, reps, warmup=5)[0],
    }


def glue_line(profile: Profile) -> str:
    """What mirage's step spends outside its µGraphs (whose kernels are
    named after their parts, ``part_...``): the torch glue between them,
    the KV-cache write among it, as Inductor builds it."""
    glue = [k for k in profile.kernels if not k.name.startswith("part_")]
    launches, us = sum(k.launches for k in glue), sum(k.us for k in glue)
    return (
        f"  of which torch between µGraphs: {launches} launches, {us:.1f} µs "
        f"({us / profile.us:.1%} of the kernel time)"
    )


def floor_us(model: PreTrainedModel, cache_len: int, bandwidth: float) -> float:
    """µs to read every weight once and the whole static cache at ``bandwidth``."""
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    item = next(model.parameters()).element_size()
    cache = (
        2 * c.num_hidden_layers * c.num_key_value_heads * cache_len * head_dim * item
    )
    return (weights + cache) / bandwidth * 1e6


METHODS = ("eager", "mirage", "torch.compile", "max-autotune")


def methods(model, args) -> dict[str, Callable]:
    """The forward of each method asked for; eager first, always."""
    mirage = {"budget": args.budget} if args.budget else {"superoptimize": False}
    if args.device == "cpu":
        mirage = {"cpu": "interpret", "superoptimize": False}
    build = {
        "mirage": lambda: torch.compile(
            model, backend="mirage", dynamic=False, options=mirage
        ),
        "torch.compile": lambda: torch.compile(model, dynamic=False),
        "max-autotune": lambda: torch.compile(
            model, dynamic=False, mode="max-autotune-no-cudagraphs"
        ),
    }
    asked = [m for m in args.methods.split(",") if m != "eager"]
    for name in asked:
        if name not in build:
            raise SystemExit(f"error: unknown method {name!r} (one of {METHODS})")
    if args.device != "cuda":
        asked = [m for m in asked if m == "mirage"]
    return {"eager": model, **{name: build[name]() for name in asked}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--small", action="store_true", help="a 2-layer, hidden-64 config"
    )
    parser.add_argument(
        "--family",
        default="llama",
        choices=sorted(FAMILIES),
        help="llama: Llama-3.2-1B's shapes; qwen2: Qwen2.5-0.5B's",
    )
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu"
    )
    parser.add_argument(
        "--dtype", default="bfloat16", choices=["float32", "float16", "bfloat16"]
    )
    parser.add_argument("--prompt", type=int, default=8, help="prompt tokens")
    parser.add_argument("--steps", type=int, default=32, help="tokens generated")
    parser.add_argument("--cache-len", type=int, default=1024)
    parser.add_argument(
        "--budget",
        type=float,
        default=30.0,
        help="search seconds per µGraph (0: no search)",
    )
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma-separated, of {','.join(METHODS)} (eager always runs)",
    )
    parser.add_argument(
        "--log", action="store_true", help="the per-op account of each graph"
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="on CUDA, print each method's N longest kernels per decode step, "
        "and for mirage the launches and time of the torch ops between its µGraphs",
    )
    args = parser.parse_args(argv)
    if args.prompt + args.steps + args.reps + 20 > args.cache_len:
        parser.error(
            "--cache-len must exceed prompt + steps + reps + 20 (the cache grows per step)"
        )
    logging.basicConfig(format="%(message)s")
    mirage_log = logging.getLogger("mirage_xdsl.torch")
    mirage_log.setLevel(logging.INFO)
    if not args.log:
        mirage_log.addFilter(lambda r: not r.getMessage().startswith("mirage:   "))

    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    with torch.device(args.device):
        config = FAMILIES[args.family](args.small)
        model = AutoModelForCausalLM.from_config(config).to(dtype).eval()
    prompt = torch.randint(
        0, model.config.vocab_size, (1, args.prompt), device=args.device
    )
    reference: list[int] | None = None
    gaps: list[float] = []
    rows = []
    for name, forward in methods(model, args).items():
        decoder = Decoder(model, forward, args.cache_len)
        start = time.perf_counter()
        tokens, step_gaps = decoder.generate(prompt, args.steps)
        seconds = time.perf_counter() - start
        if reference is None:
            reference, gaps = tokens, step_gaps
        print(
            f"{name:14s} generated {args.steps} tokens in {seconds:.1f} s, "
            f"{agreement(tokens, reference)}",
            flush=True,
        )
        if tokens != reference:
            decoder = Decoder(model, forward, args.cache_len)
            forced, _ = decoder.generate(prompt, args.steps, forced=reference)
            print(
                f"{'':14s} fed eager's tokens: {forced_agreement(forced, reference, gaps)}"
            )
        if args.device == "cuda":
            rows.append((name, *time_step(decoder, args.reps, warmup=5)))
            if args.profile:
                with torch.no_grad():
                    profile = kernel_profile(decoder.step)
                print("\n" + "\n".join(profile.lines(name, args.profile)))
                if name == "mirage":
                    print(glue_line(profile))
    if rows:
        floor = floor_us(model, args.cache_len, copy_bandwidth())
        print(
            f"\ndecode step, batch 1, {args.dtype}, static cache of {args.cache_len}:"
        )
        for name, us, graph in rows:
            note = "" if graph else "  (no CUDA graph: plain calls)"
            print(f"  {name:14s} {us:9.1f} µs/token  {floor / us:5.0%} of floor{note}")
        print(
            f"  {'floor':14s} {floor:9.1f} µs/token  (weights + cache over copy bandwidth)"
        )
        write = cache_write_us(model, args.cache_len, args.reps)
        layers = model.config.num_hidden_layers
        print(
            f"\nKV-cache write of one token ({layers} layers, K and V), a torch op "
            "between µGraphs:"
        )
        for what, us in write.items():
            shares = ", ".join(f"{us / t:.1%} of {n}" for n, t, _ in rows)
            print(f"  {what:14s} {us:9.1f} µs/token  ({shares})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
