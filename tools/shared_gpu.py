#!/usr/bin/env python3
"""Searches sharing one GPU: do their measured picks hold?

Runs N searches (default 3), each over the six workloads with measured
selection on the GPU, first one at a time and then all at once, and
compares what they timed: the input program of each workload (timed by
every search, the same program each time) and each search's pick. Every
timing holds the GPU's lock (``runtime/device_lock.py``) and is checked
(``runtime/timer.py``), so the searches side by side should time as they do
alone; before those checks, three searches side by side returned 0.0 µs for
most candidates.

  python tools/shared_gpu.py                      # at most --timeout, 450 s
  python tools/shared_gpu.py --searches 2 --budget 3 --only gqa lora

--timeout is split between the phases (:func:`phase_shares`); a search
still running at the end of its share is stopped, and what it finished
(written after each workload) is compared.

Prints a table per workload and a verdict: whether any timing was at or
below zero, whether the together runs timed the input (and their picks)
within --tolerance (10%) of the runs alone, whether a search let the cost
model choose because the GPU could not be trusted. Writes shared_gpu.json
and shared_gpu.md to --out (default $OUT, else the current directory).
Exit status 0 when no timing was at or below zero and all were within the
tolerance, 1 otherwise, 2 without a GPU.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    from mirage_xdsl.workloads import WORKLOADS

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--searches", type=int, default=3)
    p.add_argument("--only", nargs="+", choices=sorted(WORKLOADS))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--scale", type=int, default=1, help="divide the large dims")
    p.add_argument("--budget", type=float, default=5.0, help="seconds per search")
    p.add_argument("--top", type=int, default=4, help="verified candidates timed")
    p.add_argument("--tolerance", type=float, default=0.10)
    p.add_argument("--timeout", type=float, default=450.0, help="seconds in all")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names = args.only or list(WORKLOADS)
    if args.child:
        return child(args, names)

    from mirage_xdsl.runtime.measure import gpu_available

    if not gpu_available():
        print("shared_gpu: no GPU visible to torch and cuda-python")
        return 2
    start = time.monotonic()
    shares = phase_shares(args.searches)
    work = Path(tempfile.mkdtemp(prefix="shared-gpu-"))
    # compiled kernels and autotuned settings shared by every run: the first
    # run alone compiles, the others time the same binaries
    env = {**os.environ, "MIRAGE_CACHE_DIR": str(work / "cache")}
    given = argv if argv is not None else sys.argv[1:]
    alone = []
    for k in range(args.searches):
        deadline = start + args.timeout * sum(shares[: k + 1])
        (done,) = run([work / f"alone{k}.json"], given, env, deadline)
        alone.append(done)
        print(f"shared_gpu: search {k} alone, {_elapsed(start)}", flush=True)
    paths = [work / f"together{k}.json" for k in range(args.searches)]
    together = run(paths, given, env, start + args.timeout)
    print(f"shared_gpu: {args.searches} searches together, {_elapsed(start)}")
    rows = compare(names, alone, together, args.tolerance)
    text, ok = render(rows, args)
    print()
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "shared_gpu.json").write_text(
        json.dumps({"alone": alone, "together": together, "rows": rows}, indent=1)
    )
    (out / "shared_gpu.md").write_text(text + "\n")
    return 0 if ok else 1


def phase_shares(searches: int) -> list[float]:
    """The parts of --timeout for each search alone and for all together:
    the first alone compiles and tunes every kernel (half as long again as
    the others), together takes about twice one alone."""
    weights = [1.5] + [1.0] * (searches - 1) + [2.0]
    return [w / sum(weights) for w in weights]


def _elapsed(start: float) -> str:
    return f"{time.monotonic() - start:.0f} s in"


def run(paths: list[Path], argv: list[str], env: dict, deadline: float) -> list[dict]:
    """One child search per path, all at once; each one's results (what it
    finished before ``deadline``, when it had to be stopped)."""
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, *argv, "--child", str(path)], env=env
        )
        for path in paths
    ]
    for proc in procs:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return [
        json.loads(path.read_text()) if path.exists() else {"workloads": {}}
        for path in paths
    ]


def child(args, names: list[str], measure: Callable[[], Any] | None = None) -> int:
    """One search over the workloads, timed by a new ``measure()`` each (a
    ``GpuMeasure``); results written after each one."""
    from mirage_xdsl.runtime.measure import GpuMeasure
    from mirage_xdsl.search import superoptimize_module
    from mirage_xdsl.search.options import SearchOptions
    from mirage_xdsl.workloads import WORKLOADS

    jobs = max(1, (os.cpu_count() or 1) // args.searches)
    options = SearchOptions(budget=args.budget, measure_top=args.top, jobs=jobs)
    result: dict = {"pid": os.getpid(), "workloads": {}}
    for name in names:
        module = WORKLOADS[name].module(args.batch, args.scale)
        start = time.monotonic()
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            reports = superoptimize_module(
                module, options, (measure or GpuMeasure)(), cache_dir="none", log=None
            )
        result["workloads"][name] = {
            "seconds": time.monotonic() - start,
            "warnings": [str(w.message) for w in warned],
            **summary(reports),
        }
        Path(args.child).write_text(json.dumps(result, indent=1))
    return 0


def summary(reports) -> dict:
    """What a workload's search timed: the input, the pick, every figure."""
    measured = [m for r in reports for m in r.measured]
    times = [m.get("time_us") for m in measured]
    chosen = [m for m in measured if m.get("chosen")]
    inputs = [m for m in measured if m.get("input")]
    return {
        "input_us": inputs[0].get("time_us") if len(inputs) == 1 else None,
        "pick_us": chosen[0].get("time_us") if len(chosen) == 1 else None,
        "pick": _digest(chosen[0]["program"]) if len(chosen) == 1 else None,
        "times_us": times,
        "nonpositive": [t for t in times if t is not None and t <= 0],
        "spreads": [m["spread_us"] for m in measured if m.get("spread_us")],
        "retried": [line for m in measured for line in m.get("retried", [])],
        "stopped": [r.stopped for r in reports if r.stopped],
    }


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def compare(
    names: list[str], alone: list[dict], together: list[dict], tolerance: float
) -> list[dict]:
    """Per workload: the together runs' figures against the alone runs'."""
    rows = []
    for name in names:
        a = [r["workloads"].get(name, {}) for r in alone]
        t = [r["workloads"].get(name, {}) for r in together]
        base_input = _median([x.get("input_us") for x in a])
        base_pick = _median([x.get("pick_us") for x in a])
        rows.append(
            {
                "workload": name,
                "alone_input_us": base_input,
                "together_input_us": [x.get("input_us") for x in t],
                "input_within": _within(
                    [x.get("input_us") for x in t], base_input, tolerance
                ),
                "alone_pick_us": base_pick,
                "together_pick_us": [x.get("pick_us") for x in t],
                "pick_within": _within(
                    [x.get("pick_us") for x in t], base_pick, tolerance
                ),
                "same_pick": [
                    x.get("pick") is not None and x.get("pick") == y.get("pick")
                    for x, y in zip(a, t, strict=True)
                ],
                "nonpositive": sum(len(x.get("nonpositive", [])) for x in a + t),
                "fallbacks": sum(
                    "GPU unreliable" in " ".join(x.get("stopped", [])) for x in a + t
                ),
                "missing": sum(not x for x in a + t),
                "retried": sum(len(x.get("retried", [])) for x in a + t),
                "widest": max(
                    (
                        hi / lo
                        for x in a + t
                        for lo, hi in x.get("spreads", [])
                        if lo > 0
                    ),
                    default=None,
                ),
            }
        )
    return rows


def _median(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _within(values: list, base: float | None, tolerance: float) -> bool | None:
    """Whether every figure known is within ``tolerance`` of ``base`` (None:
    nothing to compare)."""
    known = [v for v in values if v is not None]
    if base is None or not known:
        return None
    return all(abs(v - base) <= tolerance * base for v in known)


def render(rows: list[dict], args) -> tuple[str, bool]:
    """A Markdown table and the verdict lines; whether all was well."""

    def us(v) -> str:
        return "-" if v is None else f"{v:.1f}"

    lines = [
        f"{args.searches} searches of {args.budget:g} s per workload "
        f"(batch {args.batch}), alone then together on one GPU",
        "",
        "| workload | input alone µs | input together µs | pick alone µs "
        "| pick together µs | same pick | ≤ 0 | cost model chose |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {us(r['alone_input_us'])} | "
            f"{', '.join(us(v) for v in r['together_input_us'])} | "
            f"{us(r['alone_pick_us'])} | "
            f"{', '.join(us(v) for v in r['together_pick_us'])} | "
            f"{sum(r['same_pick'])}/{len(r['same_pick'])} | {r['nonpositive']} | "
            f"{r['fallbacks']} |"
        )
    nonpositive = sum(r["nonpositive"] for r in rows)
    inputs = [r["input_within"] for r in rows]
    picks = [r["pick_within"] for r in rows]
    fallbacks = sum(r["fallbacks"] for r in rows)
    missing = sum(r["missing"] for r in rows)
    widest = max((r["widest"] for r in rows if r["widest"]), default=None)
    retried = sum(r["retried"] for r in rows)
    pct = f"{args.tolerance:.0%}"
    lines += [
        "",
        f"timings at or below zero: {nonpositive}",
        f"input timed within {pct} of alone: {inputs.count(True)}/{len(rows)} "
        f"workloads ({inputs.count(None)} without figures)",
        f"pick timed within {pct} of alone: {picks.count(True)}/{len(rows)} "
        f"workloads ({picks.count(None)} without figures)",
        f"selections the cost model made (GPU not trusted): {fallbacks}",
        f"figures timed again (GPU busy, or refused by the checks): {retried}",
        "widest p90/p10 of a figure timed: "
        + ("-" if widest is None else f"{widest:.2f}"),
        f"searches that did not finish in --timeout: {missing}",
    ]
    ok = nonpositive == 0 and False not in inputs and False not in picks
    return "\n".join(lines), ok and missing == 0


if __name__ == "__main__":
    sys.exit(main())
