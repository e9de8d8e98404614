"""Causal prefill attention: the search's µGraph against torch's attention kernels.

``F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)``
over ``--tokens`` tokens (GQA: ``--heads`` query heads over ``--kv-heads``
key heads of ``--head-dim``, batch ``--batch``, fp16; by default
Llama-3.2-1B's 32 over 8 heads of 64 at 512 and 2048 tokens) is captured
from torch (the causal mask becomes a 0/1 input multiplied after ``exp``)
and searched from the plain captured program. The search should fuse it into
one FlashAttention-style kernel: a grid over query-row tiles (and heads),
a for-loop over key tiles reading the mask tile beside each, and the online
softmax (a part maximum per tile, the numerator and denominator accumulated
shifted by it). Prints what the search picked and, on a GPU, the time per
call of the µGraph (candidates timed on this GPU: measured selection),
of SDPA on each backend (flash, efficient, cuDNN, math), of the same
attention written as plain torch ops (``eager math``: scores, ``masked_fill``,
softmax in fp32, as transformers' eager attention), of ``torch.compile`` of
both forms and of ``max-autotune`` (without inductor's CUDA graphs) of the
plain one. Every method's result is checked against the fp32 attention
first (fp16 tolerance); a wrong one is reported, not timed. Timed the project's way
(``runtime/timer.GraphTimer``: calls in a CUDA graph, L2 flushed before
each, the flushes' own time subtracted, the median). Without a GPU (or with
``--dry-run``) only the search runs, ranked by the cost model::

    python tools/bench_prefill_attention.py [--tokens 512,2048] [--budget 180]
        [--limit 300] [--dry-run] [--out DIR]

``--budget`` is the search's seconds over all token counts, shared in
proportion to the tokens: the search's own exploration runs on a 64-token
miniature whatever the count, but each candidate is screened by the
interpreter at full shape (about 1 s at 512 tokens, 17 s at 2048, per core)
and the reference computed once per worker (about 20 s at 2048). On the H100
with 16 cores: the searches (36 s and 144 s by default, plus the last
verification and measurement under way when the budget ends), then a minute
or two of compiling (max-autotune tunes the plain form's matmuls) and
timing, the picks first and max-autotune last; a method that would start
after ``--limit`` seconds of the run is reported as skipped, so the run
ends within about 6 minutes. Search results are cached on disk
(``$MIRAGE_CACHE_DIR``): a second run spends its time on torch's methods. Writes ``prefill_attention.json``,
``prefill_attention.md`` and each pick's µGraph
(``prefill_attention_T<tokens>.mlir``) to ``--out`` (default ``$OUT``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from mirage_xdsl.dialects import block, kernel

TOLERANCE = 2e-2
"""Relative L2 error against the fp32 attention accepted from fp16 methods."""


def prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def eager_math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The same attention as plain torch ops, as transformers' eager
    attention writes it: keys and values repeated per group, the scores
    masked with -inf above the diagonal, the softmax in fp32."""
    group = q.shape[-3] // k.shape[-3]
    k, v = (x.repeat_interleave(group, dim=-3) for x in (k, v))
    s = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(q.shape[-1]))
    t = q.shape[-2]
    above = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    p = s.masked_fill(above, float("-inf")).softmax(-1, dtype=torch.float32)
    return p.to(q.dtype) @ v


def inputs(args: argparse.Namespace, tokens: int, device: str) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).half().to(device)

    b, d = args.batch, args.head_dim
    return [
        rand(b, args.heads, tokens, d),
        rand(b, args.kv_heads, tokens, d),
        rand(b, args.kv_heads, tokens, d),
    ]


def shape_of(module) -> dict:
    """What the µGraph does: its kernels (layout ops aside), and per
    customized kernel its grid, for-loop range, which inputs it reads a tile
    of per iteration (``fmap``: the keys, values and mask along the keys),
    whether it takes part maxima, and its shifted accumulations."""
    fn = next(iter(module.body.block.ops))
    kernels = [
        op
        for op in fn.body.block.ops
        if op.name.startswith("kernel.")
        and op.name not in ("kernel.reshape", "kernel.transpose")
    ]
    return {
        "kernels": len(kernels),
        "customized": [
            {
                "grid": list(op.grid_dims),
                "forloop": op.forloop,
                "per_iteration": [
                    list(i.source.type.get_shape())
                    for i in op.walk()
                    if isinstance(i, block.InputOp) and i.forloop_dim >= 0
                ],
                "reduce_max": any(isinstance(o, block.ReduceMaxOp) for o in op.walk()),
                "shifted_accums": sum(
                    1
                    for o in op.walk()
                    if isinstance(o, block.ForloopAccumOp) and o.shift is not None
                ),
            }
            for op in kernels
            if isinstance(op, kernel.CustomizedOp)
        ],
    }


def fused(shape: dict) -> bool:
    """One kernel with a for-loop over the keys and the online softmax."""
    if shape["kernels"] != 1 or len(shape["customized"]) != 1:
        return False
    (only,) = shape["customized"]
    return only["forloop"] > 1 and only["reduce_max"] and only["shifted_accums"] == 2


# --- timing --------------------------------------------------------------------


def time_us(call: Callable[[], object]) -> float:
    from mirage_xdsl.runtime.timer import BATCH, GraphTimer

    return GraphTimer().per_call_us([call], BATCH)


def error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want).norm() / want.norm())


def timed(fn: Callable, xs: list[torch.Tensor], want: torch.Tensor) -> float | str:
    """µs per call of ``fn(*xs)``, once its result agrees with ``want``."""
    try:
        with torch.no_grad():
            err = error(fn(*xs), want)
            if not err <= TOLERANCE:
                return f"wrong (rel L2 {err:.2e})"
            return time_us(lambda: fn(*xs))
    except Exception as e:  # a method that cannot take these inputs is a row
        torch.cuda.synchronize()
        return f"error: {type(e).__name__}: {str(e).splitlines()[0][:80]}"


def torch_methods() -> dict[str, Callable]:
    """SDPA on each backend, the plain form, both compiled, and the plain
    form with max-autotune (on SDPA, inductor calls the flash kernel as is:
    nothing to tune); cheapest to build first."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def on(backend) -> Callable:
        def call(*xs):
            with sdpa_kernel([backend]):
                return prefill(*xs)

        return call

    torch._dynamo.reset()
    autotune = {"mode": "max-autotune-no-cudagraphs", "dynamic": False}
    return {
        "sdpa flash": on(SDPBackend.FLASH_ATTENTION),
        "sdpa efficient": on(SDPBackend.EFFICIENT_ATTENTION),
        "sdpa cudnn": on(SDPBackend.CUDNN_ATTENTION),
        "sdpa math": on(SDPBackend.MATH),
        "eager math": eager_math,
        "torch.compile sdpa": torch.compile(prefill, dynamic=False),
        "torch.compile math": torch.compile(eager_math, dynamic=False),
        "max-autotune math": torch.compile(eager_math, **autotune),
    }


# --- the run ---------------------------------------------------------------------


@dataclass
class Case:
    """One token count: its inputs, the search's pick, the report's row."""

    xs: list[torch.Tensor]
    found: Any
    row: dict


def searched(args: argparse.Namespace, tokens: int, budget: float, gpu: bool) -> Case:
    """The search's pick for ``tokens`` tokens (measured on the GPU)."""
    from mirage_xdsl.torch import superoptimize

    xs = inputs(args, tokens, "cuda" if gpu else "cpu")
    start = time.monotonic()
    options = {} if gpu else {"measure": None}
    found = superoptimize(prefill, xs, budget=budget, **options)
    shape = shape_of(found.module)
    row: dict = {
        "tokens": tokens,
        "search_s": round(time.monotonic() - start, 1),
        "found": shape,
        "fused": fused(shape),
        "reports": [r.summary() for r in found.reports],
        "us": {},
    }
    (args.out / f"prefill_attention_T{tokens}.mlir").write_text(str(found.module))
    print(json.dumps(row), flush=True)
    return Case(xs, found, row)


def time_all(cases: list[Case], deadline: float) -> None:
    """The pick of each case, then each torch method over the cases, the
    cheapest to build first; what starts after ``deadline`` is skipped."""
    methods = {"mirage": None, **torch_methods()}
    wants = []
    for case in cases:
        with torch.no_grad():
            wants.append(prefill(*[x.float() for x in case.xs]))
    for name, fn in methods.items():
        for case, want in zip(cases, wants, strict=True):
            if time.monotonic() > deadline:
                got: float | str = "skipped (--limit)"
            else:
                got = timed(fn or case.found, case.xs, want)
            case.row["us"][name] = got
            print(json.dumps({"tokens": case.row["tokens"], name: got}), flush=True)


def markdown(args: argparse.Namespace, rows: list[dict]) -> str:
    """One row per method, one column per token count."""
    head = f"{args.heads} query heads over {args.kv_heads} of {args.head_dim}"
    lines = [
        f"Causal prefill attention, batch {args.batch}, {head}, fp16 (µs per call)",
        "",
        "| method | " + " | ".join(f"T = {r['tokens']}" for r in rows) + " |",
        "| --- |" + " ---: |" * len(rows),
    ]
    names = list(dict.fromkeys(n for r in rows for n in r.get("us", {})))
    for name in names:
        cells = []
        for r in rows:
            us = r["us"].get(name, "")
            cells.append(f"{us:.1f}" if isinstance(us, float) else str(us))
        cells = [c.replace("|", "/") for c in cells]  # a cell holds no column
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    for r in rows:
        kernels = "; ".join(
            f"grid {'x'.join(map(str, k['grid']))}, for-loop {k['forloop']}"
            for k in r["found"]["customized"]
        )
        verdict = (
            "fused (online softmax over key tiles)"
            if r["fused"]
            else "not one kernel looping over key tiles"
        )
        lines.append(
            f"- T = {r['tokens']}: {r['found']['kernels']} kernel(s), {kernels}; "
            f"{verdict}; search {r['search_s']} s"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument(
        "--tokens", type=lambda s: [int(t) for t in s.split(",")], default=[512, 2048]
    )
    p.add_argument("--batch", type=int, default=1)
    p.add_argument(
        "--budget", type=float, default=180.0, help="search seconds, all token counts"
    )
    p.add_argument("--dry-run", action="store_true", help="search only, no GPU")
    p.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT", "prefill-attention-out"))
    )
    p.add_argument(
        "--limit",
        type=float,
        default=300.0,
        help="seconds of the whole run after which no method starts (skipped)",
    )
    args = p.parse_args(argv)
    start = time.monotonic()
    if args.heads % args.kv_heads:
        p.error(f"--heads {args.heads} is not a multiple of --kv-heads {args.kv_heads}")
    gpu = torch.cuda.is_available() and not args.dry_run
    args.out.mkdir(parents=True, exist_ok=True)
    total = sum(args.tokens)
    cases = [searched(args, t, args.budget * t / total, gpu) for t in args.tokens]
    if gpu:
        time_all(cases, start + args.limit)
    rows = [c.row for c in cases]
    (args.out / "prefill_attention.json").write_text(json.dumps(rows, indent=1))
    if gpu:
        table = markdown(args, rows)
        (args.out / "prefill_attention.md").write_text(table)
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
