#!/usr/bin/env python3
"""A decode layer with its q/k/v projections fused into one matmul, and without.

The Llama-3.2-1B-shaped decode step (``mirage_xdsl.torch.models.DecodeLayer``:
hidden 2048, 32 heads of 64, 8 KV heads, FFN 8192; fp16, ``--keys`` cached
keys) is captured twice: with sibling linears fused (the default: one
``2048 x 3072`` matmul, q, k and v slices of it) and each linear on its own
(``MIRAGE_FUSE_SIBLINGS=0``: three matmuls). Each capture is timed as

- ``default``: the captured program lowered by ``default-customize`` and the
  Triton backend (autotuned on this GPU), no search;
- ``search``: ``mirage_xdsl.torch.superoptimize``'s pick within
  ``--search-budget`` seconds (skipped with ``--no-search``),

with the number of kernel launches of each, its relative L2 error against the
layer in fp32, and µs per call timed the project's way (calls in a CUDA
graph, L2 flushed before each, the flushes' time subtracted, the median).
Both captures of a batch are timed in the same run, one after the other::

    python tools/bench_sibling_linears.py                     # about 5 minutes
    python tools/bench_sibling_linears.py --no-search         # about 1 minute
    python tools/bench_sibling_linears.py --dry-run           # no GPU: launches

Writes ``sibling_linears.json`` and ``sibling_linears.md`` (the table it
prints) to ``--out`` (default: the current directory).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import torch

from mirage_xdsl.torch import MirageFunction, capture_program, superoptimize
from mirage_xdsl.torch.models import DecodeLayer, trained

SIZES = {"dim": 2048, "heads": 32, "kv_heads": 8, "hidden": 8192}
FORMS = {"fused": "1", "separate": "0"}
"""Capture forms: the value of ``MIRAGE_FUSE_SIBLINGS`` each is captured with."""


@contextmanager
def fusing(value: str):
    """Capture with ``MIRAGE_FUSE_SIBLINGS`` set to ``value``."""
    old = os.environ.get("MIRAGE_FUSE_SIBLINGS")
    os.environ["MIRAGE_FUSE_SIBLINGS"] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ["MIRAGE_FUSE_SIBLINGS"]
        else:
            os.environ["MIRAGE_FUSE_SIBLINGS"] = old


def build(batch: int, keys: int, device: str):
    torch.manual_seed(0)
    layer = trained(DecodeLayer(**SIZES), qk_gain=2.0).half().to(device).eval()
    x = torch.randn(batch, 1, SIZES["dim"], device=device).half()
    return layer, [x, *layer.cache(batch, keys)]


def matmuls(module) -> int:
    return sum(1 for op in module.walk() if op.name == "kernel.matmul")


def launches(module) -> int:
    """Kernels the Triton backend launches for ``module`` (no GPU needed)."""
    from mirage_xdsl.lowering.triton import generate_triton

    return len(generate_triton(module).kernels)


def time_us(call: Callable[[], object]) -> float:
    from mirage_xdsl.runtime.timer import BATCH as CALLS
    from mirage_xdsl.runtime.timer import GraphTimer

    return GraphTimer().per_call_us([call], CALLS)


def rel_l2(out, ref) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def measure(fn: MirageFunction, inputs, ref) -> dict:
    out = fn(*inputs)[0]
    return {
        "launches": launches(fn.module),
        "rel_l2_vs_fp32": rel_l2(out, ref),
        "us": time_us(lambda: fn(*inputs)),
    }


def run_batch(batch: int, args) -> list[dict]:
    layer, inputs = build(batch, args.keys, "cuda")
    with torch.no_grad():
        ref = layer.float()(*[x.float() for x in inputs])[0]
        layer.half()
        rows = []
        for form, value in FORMS.items():
            with fusing(value):
                captured = capture_program(layer, inputs)
                row = {"batch": batch, "form": form}
                row["matmuls"] = matmuls(captured.module)
                row["default"] = measure(MirageFunction(captured), inputs, ref)
                if not args.no_search:
                    found = superoptimize(layer, inputs, budget=args.search_budget)
                    row["search"] = measure(found, inputs, ref)
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    """One line per batch and form: launches, error and µs of each build."""

    def cell(m: dict | None) -> str:
        if m is None:
            return "skipped"
        return f"{m['us']:.1f} µs, {m['launches']} launches, {m['rel_l2_vs_fp32']:.1e}"

    lines = [
        "| batch | q/k/v | matmuls | default | search |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['batch']} | {r['form']} | {r['matmuls']} "
            f"| {cell(r['default'])} | {cell(r.get('search'))} |"
        )
    return "\n".join(lines) + "\n"


def dry_run(args) -> int:
    """Capture both forms on the CPU and count their default launches."""
    for batch in args.batches:
        layer, inputs = build(batch, args.keys, "cpu")
        for form, value in FORMS.items():
            with fusing(value):
                module = capture_program(layer, inputs).module
            print(
                f"batch {batch} {form}: {matmuls(module)} matmuls, "
                f"{launches(module)} default launches"
            )
    return 0


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--batches", type=lambda s: [int(v) for v in s.split(",")], default=[1, 8]
    )
    p.add_argument("--keys", type=int, default=512)
    p.add_argument("--search-budget", type=float, default=45.0)
    p.add_argument("--no-search", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--out", type=Path, default=Path("."))
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        return dry_run(args)
    if not torch.cuda.is_available():
        print("error: no GPU (use --dry-run to count launches)", file=sys.stderr)
        return 1
    rows = [row for batch in args.batches for row in run_batch(batch, args)]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sibling_linears.json").write_text(json.dumps(rows, indent=1))
    table = markdown(rows)
    (args.out / "sibling_linears.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
