#!/usr/bin/env python3
"""Fit the cost model's H100 numbers to measured candidate times.

Reads the rows of one or more bench_measured.json files (every candidate the
search timed on the GPU, and the hand-written µGraphs, each with its program
text and measured µs per call), costs each program with the current target
and with the fitted one (``mirage_xdsl.search.calibration.fit``), and prints
for both: the Spearman rank correlation with measured time over all
candidates and within each workload and batch (the ranking a search needs),
and the mean absolute log error. Prints the fitted numbers as they would go
into ``cost_model.py``.

  python tools/calibrate_cost_model.py docs/bench/bench_measured.json
  python tools/calibrate_cost_model.py run1.json run2.json --out docs/bench

Writes calibration.json and calibration.md to --out when given.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np

from mirage_xdsl.search.calibration import Sample, fit, spearman
from mirage_xdsl.search.cost_model import H100, Target, cost


def load_samples(paths: list[str]) -> tuple[list[Sample], list[tuple[str, int]]]:
    """Every timed row with a program, and its (workload, batch)."""
    from mirage_xdsl.ir.context import make_context
    from mirage_xdsl.ir.diagnostics import parse
    from mirage_xdsl.search.ugraph import from_function
    from mirage_xdsl.semantics.interpreter import entry_function

    samples, groups = [], []
    for path in paths:
        for row in json.loads(Path(path).read_text())["rows"]:
            if row.get("time_us") is None or not row.get("program"):
                continue
            module = parse(make_context(), row["program"], path)
            graph = from_function(entry_function(module))
            group = f"{row['workload']} b={row['batch']}"
            samples.append(Sample(graph, row["time_us"] * 1e-6, group))
            groups.append((row["workload"], row["batch"]))
    return samples, groups


def figures(target: Target, samples, groups) -> dict:
    """Rank correlation overall and per (workload, batch), and log error."""
    est = [cost(s.graph, target) for s in samples]
    meas = [s.seconds for s in samples]
    per: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        per[g].append(i)
    within = {
        f"{w} b={b}": spearman([est[i] for i in idx], [meas[i] for i in idx])
        for (w, b), idx in sorted(per.items())
        if len(idx) > 2
    }
    return {
        "spearman": spearman(est, meas),
        "spearman_within": within,
        "mean_within": float(np.nanmean(list(within.values()))) if within else None,
        "mean_abs_log_error": float(
            np.mean([abs(math.log(e / m)) for e, m in zip(est, meas, strict=True)])
        ),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("inputs", nargs="+", help="bench_measured.json files")
    p.add_argument("--start", choices=("current", "datasheet"), default="current")
    p.add_argument("--out", help="folder for calibration.json and calibration.md")
    args = p.parse_args(argv)

    samples, groups = load_samples(args.inputs)
    if len(samples) < 4:
        print(f"calibrate: only {len(samples)} timed candidates with programs")
        return 2
    # Either --start is gpu_target.H100: its numbers are the datasheet ones.
    start = H100
    fitted = fit(samples, start)
    before = figures(start, samples, groups)
    after = figures(fitted, samples, groups)
    lines = [
        f"calibrate: {len(samples)} timed candidates over {len(set(groups))} "
        "workload/batch pairs",
        "| | Spearman, all | Spearman within a workload (mean) | mean abs log error |",
        "| --- | --- | --- | --- |",
    ]
    for label, f in (("before", before), ("after", after)):
        within = "—" if f["mean_within"] is None else f"{f['mean_within']:.2f}"
        lines.append(
            f"| {label} | {f['spearman']:.2f} | {within} "
            f"| {f['mean_abs_log_error']:.2f} |"
        )
    lines += ["", "| workload | Spearman before | after |", "| --- | --- | --- |"]
    for key, rho in before["spearman_within"].items():
        lines.append(f"| {key} | {rho:.2f} | {after['spearman_within'][key]:.2f} |")
    lines += ["", "| number | before | fitted |", "| --- | --- | --- |"]
    for f in fields(Target):
        a, b = getattr(start, f.name), getattr(fitted, f.name)
        if isinstance(a, float) and a != b:
            lines.append(f"| {f.name} | {a:.4g} | {b:.4g} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "calibration.md").write_text(text + "\n")
        (out / "calibration.json").write_text(
            json.dumps(
                {
                    "inputs": args.inputs,
                    "samples": len(samples),
                    "before": {"target": asdict(start), **before},
                    "after": {"target": asdict(fitted), **after},
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
