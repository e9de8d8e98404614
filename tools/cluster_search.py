"""The whole-layer search on the local pool and on a Dask cluster, compared.

The Llama-3.2-1B-shaped decode step of ``tools/torch_models.py`` (batch 1,
512 cached keys, fp16, built by its builder) is captured and searched twice
on this machine with the same budget, seed and options:

1. on the search's own process pool of ``--jobs`` forked workers;
2. on a Dask ``LocalCluster`` of ``--workers`` processes of ``--threads``
   threads each, started here and given to the search as
   ``client.get_executor()``.

Each search runs in a fresh Python process of its own, with the search
cache off and a new ``MIRAGE_CACHE_DIR`` for its cubins and tuning, so
neither is served from the other's caches, on disk or in memory. The
cost model picks unless ``--measure`` is given and CUDA is present; then
measured selection on the GPU decides and the pick is timed per call.
Prints a Markdown table: per run the search's wall time, the layer's kernels
before and after, the pick's cost-model estimate (and measured time), the
tasks made and those the cluster's workers ran; per segment its kernels
before → after, estimate and whether it stopped at its budget; and whether
both runs printed the same µGraph. Writes it all, with both programs, as
JSON to ``--out``::

    python tools/cluster_search.py [--budget 120] [--jobs 16] [--workers 4]
        [--threads 4] [--seed 0] [--measure] [--out cluster_search.json]

With the defaults on a 16-core machine it takes about 5 minutes (two 120 s
searches, their start-up and capture, the cluster's start).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

RUNS = ("pool", "dask")
TOOLS = Path(__file__).resolve().parent


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=120.0, help="seconds per search")
    p.add_argument("--jobs", type=int, default=16, help="local pool processes")
    p.add_argument("--workers", type=int, default=4, help="Dask worker processes")
    p.add_argument("--threads", type=int, default=4, help="threads per Dask worker")
    p.add_argument("--seed", type=int, default=0, help="the search's seed")
    p.add_argument(
        "--measure", action="store_true", help="measured selection where CUDA is"
    )
    p.add_argument("--out", type=Path, default=Path("cluster_search.json"))
    p.add_argument("--run", choices=RUNS, help=argparse.SUPPRESS)
    p.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    return p


def check(args: argparse.Namespace) -> str | None:
    """The first bad argument, as an error line, or None."""
    if args.budget <= 0:
        return f"--budget must be positive, got {args.budget}"
    for name in ("jobs", "workers", "threads"):
        if getattr(args, name) < 1:
            return f"--{name} must be at least 1, got {getattr(args, name)}"
    try:
        import distributed  # noqa: F401
    except ImportError:
        return "the Dask run needs dask.distributed (pip install 'mirage-xdsl[dask]')"
    return None
    return None


# --- one search, in a process of its own -------------------------------------


def estimate_us(module) -> float:
    """The cost model's estimate of the whole program, in µs."""
    from mirage_xdsl.search.cost_model import cost
    from mirage_xdsl.search.ugraph import from_function
    from mirage_xdsl.semantics.interpreter import entry_function

    return round(cost(from_function(entry_function(module))) * 1e6, 2)


def run_search(args: argparse.Namespace) -> dict:
    """Capture the layer and search it on ``args.run``'s executor."""
    import torch

    sys.path.insert(0, str(TOOLS))
    import torch_models

    from mirage_xdsl.ir.printing import module_text
    from mirage_xdsl.passes.superoptimize import resolve_measure
    from mirage_xdsl.torch import capture, superoptimize

    cuda = torch.cuda.is_available()
    measure = resolve_measure("auto") if args.measure else None
    torch.manual_seed(0)
    model, inputs = torch_models.DECODE[torch_models.QUICK].build(
        "cuda" if measure is not None else "cpu"
    )
    options = dict(budget=args.budget, seed=args.seed, jobs=args.jobs, cache_dir="none")
    row: dict = {"run": args.run, "cuda": cuda, "measured": measure is not None}
    with torch.no_grad():
        given = capture(model, inputs)
        row["kernels_before"] = torch_models.kernels(given)
        with placed(args, row):
            start = time.monotonic()
            found = superoptimize(model, inputs, measure=measure, **options)
            row["search_s"] = round(time.monotonic() - start, 2)
        row["kernels_after"] = torch_models.kernels(found.module)
        row["segments"] = torch_models.segments(found)
        row["tasks_made"] = sum(sum(r.tasks) for r in found.reports)
        row["cost_us"] = [estimate_us(given), estimate_us(found.module)]
        if measure is not None:
            row["pick_us"] = round(torch_models.time_us(lambda: found(*inputs)), 2)
    row["program"] = module_text(found.module)
    return row


@contextlib.contextmanager
def placed(args: argparse.Namespace, row: dict) -> Iterator[None]:
    """Inside, the search runs on ``args.run``'s executor: its own pool, or a
    Dask cluster started here, whose start time and the tasks its workers ran
    go into ``row``."""
    if args.run == "pool":
        yield
        return
    import distributed

    from mirage_xdsl.search.dispatch import RETRIES, executing

    start = time.monotonic()
    with (
        distributed.LocalCluster(
            n_workers=args.workers,
            threads_per_worker=args.threads,
            processes=True,
            dashboard_address=None,
            worker_dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        client.wait_for_workers(args.workers)
        row["cluster_start_s"] = round(time.monotonic() - start, 2)
        with distributed.get_task_stream(client) as stream:
            with executing(client.get_executor(pure=False, retries=RETRIES)):
                yield
        ran_on_workers(stream.data, row)  # the stream is read on its exit


def ran_on_workers(tasks: list[dict], row: dict) -> None:
    """The search's tasks among those the cluster ran, and on how many workers."""
    ran = [t for t in tasks if t["key"].startswith("run_remote")]
    row["tasks_on_workers"] = len(ran)
    row["workers_used"] = len({t["worker"] for t in ran})


def child(args: argparse.Namespace) -> int:
    """Run one search and write its row to ``args.result``."""
    try:
        row = run_search(args)
    except Exception as e:  # the parent reports it as the run's error
        row = {"run": args.run, "error": f"{type(e).__name__}: {e}".splitlines()[0]}
    args.result.write_text(json.dumps(row))
    return 0 if "error" not in row else 1


def spawn(args: argparse.Namespace, run: str, directory: Path) -> dict:
    """``run``'s search in a fresh interpreter with caches of its own (the
    search's is off; cubins and tuning go to a new directory): nothing the
    other run found or compiled is shared with it."""
    result = directory / f"{run}.json"
    command = [
        sys.executable, __file__, "--run", run, "--result", str(result),
        "--budget", str(args.budget), "--jobs", str(args.jobs),
        "--workers", str(args.workers), "--threads", str(args.threads),
        "--seed", str(args.seed), *(["--measure"] if args.measure else []),
    ]  # fmt: skip
    caches = {"MIRAGE_CACHE_DIR": str(directory / f"{run}-cache")}
    start = time.monotonic()
    code = subprocess.run(command, env={**os.environ, **caches}).returncode
    if not result.exists():
        return {"run": run, "error": f"the {run} run exited with status {code}"}
    row = json.loads(result.read_text())
    row["process_s"] = round(time.monotonic() - start, 2)
    return row


# --- the comparison ----------------------------------------------------------


def compare(rows: dict[str, dict]) -> dict:
    """Both runs' rows, and whether they picked the same µGraph."""
    programs = [rows[r].get("program") for r in RUNS]
    same = None if None in programs else programs[0] == programs[1]
    return {"same_pick": same, "runs": rows}


def _cell(v) -> str:
    return "" if v is None else str(v)


def markdown(result: dict, args: argparse.Namespace) -> str:
    runs = result["runs"]
    lines = [
        f"Llama-3.2-1B-shaped decode layer (batch 1, 512 cached keys, fp16); "
        f"budget {args.budget:g} s, seed {args.seed}; pool: {args.jobs} jobs; "
        f"dask: {args.workers} workers x {args.threads} threads.\n",
        "| run | search s | cluster start s | kernels before → after "
        "| cost-model µs (input → pick) | measured µs | tasks made "
        "| tasks on workers (workers) | segments stopped |",
        "| --- " * 9 + "|",
    ]
    for name in RUNS:
        r = runs[name]
        if "error" in r:
            lines.append(f"| {name} | {r['error']} |" + " |" * 7)
            continue
        stopped = sum(1 for s in r["segments"] if s["stopped"])
        on_workers = (
            f"{r['tasks_on_workers']} ({r['workers_used']})"
            if "tasks_on_workers" in r
            else ""
        )
        lines.append(
            f"| {name} | {r['search_s']} | {_cell(r.get('cluster_start_s'))} "
            f"| {r['kernels_before']} → {r['kernels_after']} "
            f"| {r['cost_us'][0]} → {r['cost_us'][1]} "
            f"| {_cell(r.get('pick_us'))} "
            f"| {r['tasks_made']} | {on_workers} | {stopped}/{len(r['segments'])} |"
        )
    lines += segment_table(runs)
    lines.append(f"\nSelection: {selection(runs, args)}.")
    same = {True: "yes", False: "no", None: "unknown (a run failed)"}
    lines.append(f"\nSame µGraph picked by both runs: {same[result['same_pick']]}.")
    return "\n".join(lines) + "\n"


def selection(runs: dict[str, dict], args: argparse.Namespace) -> str:
    """What picked among the verified candidates."""
    if any(r.get("measured") for r in runs.values()):
        return "measured on the GPU"
    if args.measure:
        return "the cost model (--measure, but no CUDA device)"
    return "the cost model"


def segment_table(runs: dict[str, dict]) -> list[str]:
    """Per segment: each run's kernels, estimate, measured time and stop."""
    if any("error" in runs[r] for r in RUNS):
        return []
    head = " | ".join(
        f"{r} kernels | {r} cost µs | {r} chosen µs | {r} stopped" for r in RUNS
    )
    lines = ["", f"| segment | {head} |", "| --- " * (1 + 4 * len(RUNS)) + "|"]
    by_run = [runs[r]["segments"] for r in RUNS]
    for segs in zip(*by_run, strict=False):
        cells = [segs[0]["segment"]]
        for s in segs:
            cost = f"{s['cost_us'][0]} → {s['cost_us'][1]}"
            cells += [s["kernels"], cost, _cell(s["chosen_us"]), s["stopped"]]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    problem = check(args)
    if problem:
        print(f"cluster_search: error: {problem}", file=sys.stderr)
        return 1
    if args.run:
        return child(args)
    with tempfile.TemporaryDirectory(prefix="cluster-search-") as tmp:
        rows = {run: spawn(args, run, Path(tmp)) for run in RUNS}
    result = compare(rows)
    result["options"] = {
        k: getattr(args, k)
        for k in ("budget", "jobs", "workers", "threads", "seed", "measure")
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(markdown(result, args))
    failed = any("error" in r for r in rows.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
