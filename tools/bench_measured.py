#!/usr/bin/env python3
"""Measured selection on a GPU: what the search's candidates cost and take.

For each workload and batch, runs the search with ``measure`` on the GPU: the
input program and the cheapest verified candidates (by the cost model) are
compiled with both backends, timed (CUDA graph of 20 calls, L2 flushed before
each, flush time subtracted, median) and the fastest kept. The hand-written
µGraphs of the workload are timed the same way beside them (reference
points, and more kinds of kernel for calibrating the cost model). Prints
every candidate's cost-model estimate beside its measured time, and the cost
model's Spearman rank correlation with measured time over all of them.

  python tools/bench_measured.py --only rmsnorm_linear gated_mlp --batches 1
  python tools/bench_measured.py --budget 120 --out $OUT

Writes bench_measured.json (with every candidate's program, what
tools/calibrate_cost_model.py fits to) and bench_measured.md to --out
(default $OUT), after each workload, so an interrupted run keeps what it
measured.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from mirage_xdsl.search.calibration import spearman


def main(argv: list[str] | None = None) -> int:
    from mirage_xdsl.workloads import WORKLOADS

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--only", nargs="+", choices=sorted(WORKLOADS))
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--budget", type=float, default=120, help="search seconds")
    p.add_argument("--max-kernels", type=int, default=2)
    p.add_argument("--top", type=int, default=8, help="verified candidates timed")
    p.add_argument(
        "--no-handwritten", action="store_true", help="time only the search's"
    )
    p.add_argument("--out", default=os.environ.get("OUT"))
    args = p.parse_args(argv)

    from mirage_xdsl.runtime.measure import gpu_available

    if not gpu_available():
        print("bench_measured: no GPU visible to torch and cuda-python")
        return 2
    rows: list[dict] = []
    for name in args.only or list(WORKLOADS):
        for batch in args.batches:
            start = time.monotonic()
            found = measured_search(name, batch, args)
            if not args.no_handwritten:
                found += measured_handwritten(name, batch)
            rows += found
            print(
                f"bench_measured: {name} b={batch}: {len(found)} timed in "
                f"{time.monotonic() - start:.0f} s",
                flush=True,
            )
            write(rows, args.out)
    table, summary = report(rows)
    print()
    print(table)
    print()
    print(summary)
    return 0


def measured_search(name: str, batch: int, args) -> list[dict]:
    """The search with a GPU measure: every timed candidate as a row."""
    from mirage_xdsl.runtime.measure import GpuMeasure
    from mirage_xdsl.search.options import SearchOptions
    from mirage_xdsl.search.superoptimizer import superoptimize_function
    from mirage_xdsl.semantics.interpreter import entry_function
    from mirage_xdsl.workloads import WORKLOADS

    options = SearchOptions(
        budget=args.budget, max_kernels=args.max_kernels, measure_top=args.top
    )
    outcome = superoptimize_function(
        entry_function(WORKLOADS[name].module(batch)),
        options,
        measure=GpuMeasure(),
        cache_dir="none",
    )
    print(outcome.report.summary(), flush=True)
    return candidate_rows(name, batch, outcome.report)


def candidate_rows(name: str, batch: int, report) -> list[dict]:
    """A search report's timed candidates as rows of this tool's table (and of
    what tools/calibrate_cost_model.py reads)."""
    return [
        {
            "workload": name,
            "batch": batch,
            "candidate": "input" if m.get("input") else "verified",
            **m,
        }
        for m in report.measured
    ]


def measured_handwritten(name: str, batch: int) -> list[dict]:
    """The workload's hand-written µGraphs, timed and costed the same way."""
    from mirage_xdsl.ir.printing import module_text
    from mirage_xdsl.runtime.measure import GpuMeasure
    from mirage_xdsl.search import cost_model
    from mirage_xdsl.search.ugraph import from_function
    from mirage_xdsl.semantics.interpreter import entry_function
    from mirage_xdsl.workloads import HANDWRITTEN

    measure = GpuMeasure()
    rows = []
    for label, (workload, build) in HANDWRITTEN.items():
        if workload != name:
            continue
        module = build(batch)
        graph = from_function(entry_function(module))
        measure(module)
        rows.append(
            {
                "workload": name,
                "batch": batch,
                "candidate": label,
                "kernels": graph.kernels,
                "cost_us": cost_model.cost(graph) * 1e6,
                "program": module_text(module),
                **measure.describe(),
            }
        )
    return rows


def timed(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r.get("time_us") is not None]


def correlation(rows: list[dict]) -> float:
    """The cost model's Spearman rank correlation with measured time."""
    return spearman(
        [r["cost_us"] for r in timed(rows)], [r["time_us"] for r in timed(rows)]
    )


def report(rows: list[dict]) -> tuple[str, str]:
    """The markdown table of every row, and the rank-correlation summary."""
    rho = correlation(rows)
    lines = [
        "| workload | b | candidate | kernels | cost model µs | measured µs | backend "
        "| triton µs | cuda µs | chosen |",
        "|" + " --- |" * 10,
    ]
    for r in rows:
        by = r.get("by_backend") or {}
        measured = "—" if r.get("time_us") is None else f"{r['time_us']:.1f}"
        lines.append(
            f"| {r['workload']} | {r['batch']} | {r['candidate']} | {r['kernels']} "
            f"| {r['cost_us']:.1f} | {measured} | {r.get('backend') or '—'} "
            f"| {by.get('triton', float('nan')):.1f} | {by.get('cuda', float('nan')):.1f} "
            f"| {'yes' if r.get('chosen') else ''} |"
        )
    summary = (
        f"bench_measured: {len(timed(rows))} candidates timed; Spearman rank "
        f"correlation of the cost model with measured time: {rho:.2f}"
    )
    return "\n".join(lines), summary


def write(rows: list[dict], out: str | None) -> None:
    if not out:
        return
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    table, summary = report(rows)
    (folder / "bench_measured.md").write_text(f"{table}\n\n{summary}\n")
    (folder / "bench_measured.json").write_text(
        json.dumps({"rows": rows, "spearman": correlation(rows)}, indent=1)
    )


if __name__ == "__main__":
    sys.exit(main())
