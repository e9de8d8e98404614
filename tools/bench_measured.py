#!/usr/bin/env python3
"""Measured selection on a GPU: what the search's candidates cost and take.

For each workload and batch, runs the search with ``measure`` on the GPU: the
input program and the cheapest verified candidates (by the cost model) are
compiled with both backends, timed (CUDA graph of 20 calls, L2 flushed before
each, flush time subtracted, median) and the fastest kept. Prints every
candidate's cost-model estimate beside its measured time, and the cost
model's Spearman rank correlation with measured time over all candidates.

  python tools/bench_measured.py --only rmsnorm_linear gated_mlp --batches 1
  python tools/bench_measured.py --budget 120 --out $OUT

Writes bench_measured.json and bench_measured.md to --out (default $OUT).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def ranks(values: list[float]) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    r = np.empty(len(values))
    r[order] = np.arange(len(values))
    return r


def spearman(xs: list[float], ys: list[float]) -> float:
    """Rank correlation (no tie correction; the figures are continuous)."""
    if len(xs) < 2:
        return float("nan")
    return float(np.corrcoef(ranks(xs), ranks(ys))[0, 1])


def main(argv: list[str] | None = None) -> int:
    from mirage_xdsl.workloads import WORKLOADS

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--only", nargs="+", choices=sorted(WORKLOADS))
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--budget", type=float, default=120, help="search seconds")
    p.add_argument("--max-kernels", type=int, default=2)
    p.add_argument("--out", default=os.environ.get("OUT"))
    args = p.parse_args(argv)

    from mirage_xdsl.interpreter import entry_function
    from mirage_xdsl.runtime.measure import GpuMeasure, gpu_available
    from mirage_xdsl.search.options import SearchOptions
    from mirage_xdsl.search.superoptimizer import superoptimize_function

    if not gpu_available():
        print("bench_measured: no GPU visible to torch and cuda-python")
        return 2
    rows, pairs = [], []
    for name in args.only or list(WORKLOADS):
        for batch in args.batches:
            start = time.monotonic()
            module = WORKLOADS[name].module(batch)
            options = SearchOptions(budget=args.budget, max_kernels=args.max_kernels)
            outcome = superoptimize_function(
                entry_function(module), options, measure=GpuMeasure(), cache_dir="none"
            )
            report = outcome.report
            print(report.summary(), flush=True)
            for m in report.measured:
                rows.append({"workload": name, "batch": batch, **m})
                if m.get("time_us") is not None:
                    pairs.append((m["cost_us"], m["time_us"]))
            print(
                f"bench_measured: {name} b={batch}: {len(report.measured)} timed in "
                f"{time.monotonic() - start:.0f} s",
                flush=True,
            )
    rho = spearman([c for c, _ in pairs], [t for _, t in pairs])
    lines = [
        "| workload | b | candidate | kernels | cost model µs | measured µs | backend "
        "| triton µs | cuda µs | chosen |",
        "|" + " --- |" * 10,
    ]
    for r in rows:
        by = r.get("by_backend") or {}
        label = "input" if r.get("input") else "verified"
        measured = "—" if r.get("time_us") is None else f"{r['time_us']:.1f}"
        lines.append(
            f"| {r['workload']} | {r['batch']} | {label} | {r['kernels']} "
            f"| {r['cost_us']:.1f} | {measured} | {r.get('backend') or '—'} "
            f"| {by.get('triton', float('nan')):.1f} | {by.get('cuda', float('nan')):.1f} "
            f"| {'yes' if r.get('chosen') else ''} |"
        )
    summary = (
        f"bench_measured: {len(pairs)} candidates timed; Spearman rank correlation "
        f"of the cost model with measured time: {rho:.2f}"
    )
    table = "\n".join(lines)
    print()
    print(table)
    print()
    print(summary)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench_measured.md").write_text(f"{table}\n\n{summary}\n")
        (out / "bench_measured.json").write_text(
            json.dumps({"rows": rows, "spearman": rho}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
