"""Decode attention over the key cache: split over the keys, or a few blocks
walking them? The cost model's figure beside the device's, for each form.

The masked GQA decode attention that transformers' Llama runs with a static
cache (``F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
enable_gqa=True)``, one query per head, ``--heads`` over ``--kv-heads`` of
``--head-dim``, bf16) is captured, and its attention segment (the part
after the layout ops, as the search cuts it) is searched twice per cache
length: as the search runs, and restricted to one block per key head
(``griddims``, one kernel), the form the search picked before the cost model
charged a block's own streaming rate (``Target.block_bandwidth``).

On a GPU both searches time their candidates as a search does (measured
selection: the input, the cost model's cheapest of each kernel count and
the rest of the pool, Triton, CUDA graphs, L2 flushed before each call), and
each timed candidate is printed with its kernels (grid, for-loop), the cost
model's estimate with and without the per-block rate, and the measured time;
the chosen one is marked. Without a GPU, or with ``--dry-run``, the cost
model decides, and the captured program, the pick, the cheapest candidate of
one and of two kernels and the one-block-per-head pick are printed with
their estimates::

    python tools/bench_block_streaming.py [--keys 512,1024,4096]
        [--budget 60] [--dry-run] [--out DIR]

On the H100 with 16 cores: two searches of ``--budget`` seconds per cache
length, each timing its candidates within its budget, about 7 minutes for
the defaults. Writes ``block_streaming.json`` to ``--out`` (default
``$OUT``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from mirage_xdsl.search import make_options
from mirage_xdsl.search.cost_model import H100, cost
from mirage_xdsl.search.partition import Segment, partition
from mirage_xdsl.search.squeeze import squeeze
from mirage_xdsl.search.superoptimizer import superoptimize_function
from mirage_xdsl.search.ugraph import UGraph, from_function
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.torch.capture import capture

WITHOUT_BLOCK_RATE = replace(H100, block_bandwidth=math.inf)
"""The cost model as it was before a block's own streaming rate counted."""


class Decode(torch.nn.Module):
    """One decode step's attention over a static cache of ``keys``, the first
    ``filled`` of them written (the mask attends to those)."""

    def __init__(self, keys: int, filled: int) -> None:
        super().__init__()
        self.register_buffer("mask", torch.arange(keys).reshape(1, 1, 1, -1) < filled)

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=self.mask, enable_gqa=True
        )


def attention_segment(args: argparse.Namespace, keys: int):
    """The captured program's segment holding the softmax."""
    b, d = 1, args.head_dim
    xs = [
        torch.randn(b, args.heads, 1, d).bfloat16(),
        torch.randn(b, args.kv_heads, keys, d).bfloat16(),
        torch.randn(b, args.kv_heads, keys, d).bfloat16(),
    ]
    fn = entry_function(capture(Decode(keys, keys * 3 // 4).bfloat16(), xs)).clone()
    squeeze(fn)
    for piece in partition(fn, make_options().segment_ops):
        if isinstance(piece, Segment) and any(
            op.name == "kernel.reduce_max" for op in piece.function.body.block.ops
        ):
            return piece.function
    raise SystemExit("bench_block_streaming: no attention segment in the capture")


def kernels_of(ug: UGraph) -> list[str]:
    return [
        op.kind
        if op.graph is None
        else "x".join(map(str, op.graph.grid)) + f"/{op.graph.forloop}"
        for op in ug.ops
    ]


def row(name: str, ug: UGraph, time_us: float | None = None) -> dict:
    out = {
        "form": name,
        "kernels": kernels_of(ug),
        "cost_us": round(cost(ug) * 1e6, 2),
        "cost_without_block_rate_us": round(cost(ug, WITHOUT_BLOCK_RATE) * 1e6, 2),
    }
    return out if time_us is None else out | {"time_us": round(time_us, 2)}


def search(fn, budget: float, measure=None, **options):
    outcome = superoptimize_function(
        fn, make_options(budget=budget, **options), measure, "none"
    )
    print(outcome.report.summary(), file=sys.stderr)
    return outcome


def timed(outcome, name: str) -> list[dict]:
    """Each candidate the search timed (its measured selection), the chosen
    one marked."""
    from mirage_xdsl.ir.context import make_context
    from mirage_xdsl.ir.diagnostics import parse

    rows = []
    for m in outcome.report.measured:
        if m.get("time_us") is None:
            continue
        module = parse(make_context(), m["program"], "<timed>")
        label = name + (" (chosen)" if m.get("chosen") else "")
        label += " (input)" if m.get("input") else ""
        rows.append(row(label, from_function(entry_function(module)), m["time_us"]))
    return rows


def untimed(outcome, fn, name: str) -> list[dict]:
    """Without a GPU: the captured program, the pick, and the cheapest
    screened candidate of each kernel count where that is not the pick."""
    graph = outcome.graph or from_function(outcome.function)
    rows = [row("captured", from_function(fn)), row(name, graph)]
    for kernels in (1, 2):
        same = [
            c for c in outcome.candidates if c.screened and c.graph.kernels == kernels
        ]
        best = min(same, key=lambda c: c.order(), default=None)
        if best is not None and best.graph.ops != graph.ops:
            rows.append(row(f"cheapest of {kernels} kernel(s)", best.graph))
    return rows


def rows_for(fn, args: argparse.Namespace, measure) -> list[dict]:
    """The search's own (timed on a GPU), then one block per key head."""
    few = {"griddims": ((args.kv_heads, 1, 1),), "max_kernels": 1}
    found = search(fn, args.budget, measure)
    pinned = search(fn, args.budget, measure, **few)
    if measure is None:
        return untimed(found, fn, "search's pick") + [
            row("one block per key head", pinned.graph or from_function(fn))
        ]
    return timed(found, "search") + timed(pinned, "one block per key head")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--keys", default="512,1024,4096")
    p.add_argument("--budget", type=float, default=60.0, help="seconds per search")
    p.add_argument("--dry-run", action="store_true", help="no GPU timing")
    p.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT", "block-streaming-out"))
    )
    args = p.parse_args(argv)
    measure = None
    if torch.cuda.is_available() and not args.dry_run:
        from mirage_xdsl.runtime.measure import GpuMeasure

        measure = GpuMeasure()
    rows = []
    for keys in (int(k) for k in args.keys.split(",")):
        for r in rows_for(attention_segment(args, keys), args, measure):
            rows.append({"keys": keys, **r})
            print(json.dumps(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "block_streaming.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
