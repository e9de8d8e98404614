"""Benchmark the superoptimizer on every workload at full shapes.

For each workload (and batch size) prints: seconds, graphs explored, pruned by
abstract expression, tasks per kernel depth (the size of the space each depth
searches), deeper prefixes and tasks cut by the cost bound, complete
candidates, verified, kernels before/after and the cost model's speed-up.
``--no-bound`` keeps what the bound would cut. With ``--no-prune`` each
workload is searched again with abstract-expression pruning off, under a time
budget, to show what pruning buys (graphs explored per second of useful work,
and whether the answer is reached at all).

    python tools/bench_search.py                   # b=1, all workloads
    python tools/bench_search.py --batch 1 8 --no-prune --no-prune-budget 120
    python tools/bench_search.py --no-prune --prune-comparison-only
    python tools/bench_search.py --workloads rmsnorm_linear --no-prune \
        --prune-comparison-only --class-cap 0 --no-prune-budget 600

The block-level search stops growing a layout at ``MAX_CLASSES`` tensor
classes, which an unpruned search reaches at once, so its count is what fits
under that cap rather than the space. ``--class-cap 0`` lifts the cap for
the comparison: an unpruned search that runs out of its budget then reports
a lower bound of the graphs the space holds. "untried" counts the ops of
the rounds the budget or the cap cut short that were never tried (counted by
label signature, not run): explored plus untried is a lower bound too, and
the one that reaches past what fits in memory, since a round of an unpruned
search can hold billions of ops. Use ``--jobs 1`` so a stopped search still
reports both, and ``--layout-budget`` so that the unpruned search gives each
of its layouts a share of the time instead of spending it all on the first:

    python tools/bench_search.py --jobs 1 --workloads norm_transformer \
        --no-prune --prune-comparison-only --class-cap 0 \
        --no-prune-budget 300 --layout-budget 20
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from mirage_xdsl.search import block_search
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.superoptimizer import superoptimize_function
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.workloads import WORKLOADS

HEADER = (
    f"{'workload':<18}{'b':>2} {'deep':>4} {'prune':>5} {'seconds':>8} {'explored':>10} "
    f"{'pruned':>9} {'tasks per depth':>16} {'bounded':>14} {'complete':>8} "
    f"{'verified':>8} {'kernels':>8} {'speed-up':>8} {'untried':>14}  status"
)


def row(name: str, batch: int, prune: bool, report, seconds: float, deep: int) -> str:
    speedup = report.input_cost / report.best_cost if report.best_cost else 1.0
    kernels = f"{report.kernels_before}->{report.kernels_after}"
    return (
        f"{name:<18}{batch:>2} {deep:>4} {'on' if prune else 'off':>5} {seconds:>8.1f} "
        f"{report.explored:>10} {report.pruned:>9} "
        f"{'/'.join(map(str, report.tasks)):>16} "
        f"{f'{report.bounded}/{report.skipped}':>14} {report.complete:>8} "
        f"{report.verified:>8} {kernels:>8} {speedup:>7.2f}x {report.unexplored:>14}"
        f"  {report.stopped or 'complete'}"
    )


PICKS: Path | None = None
"""Where ``--picks`` writes each search's pick as MLIR text (None: nowhere)."""


def run(name: str, batch: int, options: SearchOptions) -> tuple:
    program = WORKLOADS[name].module(batch)
    start = time.monotonic()
    outcome = superoptimize_function(entry_function(program), options, cache_dir="none")
    seconds = time.monotonic() - start
    if PICKS is not None:
        PICKS.mkdir(parents=True, exist_ok=True)
        prune = "pruned" if options.prune else "unpruned"
        path = PICKS / f"{name}_b{batch}_k{options.max_kernels}_{prune}.mlir"
        path.write_text(f"{outcome.function}\n")
    return outcome.report, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="*", default=sorted(WORKLOADS))
    parser.add_argument("--batch", nargs="*", type=int, default=[1])
    parser.add_argument("--budget", type=float, default=600.0)
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--max-kernels", type=int, default=2)
    parser.add_argument("--no-prune", action="store_true", help="also search unpruned")
    parser.add_argument(
        "--no-bound",
        action="store_true",
        help="keep deeper prefixes that cannot beat the best found (the space "
        "the cost bound saves)",
    )
    parser.add_argument("--no-prune-budget", type=float, default=120.0)
    parser.add_argument(
        "--prune-comparison-only",
        action="store_true",
        help="with --no-prune: skip the default search, run only the comparison",
    )
    parser.add_argument(
        "--class-cap",
        type=int,
        default=None,
        help="tensor classes per layout in the --no-prune comparison (0: no "
        f"cap; default {block_search.MAX_CLASSES})",
    )
    parser.add_argument(
        "--layout-budget",
        type=float,
        default=None,
        help="with --no-prune: seconds each layout of the unpruned search may "
        "saturate, so that it reaches every layout and counts what each holds "
        "(default: no limit, the first layouts take the whole budget)",
    )
    parser.add_argument(
        "--picks",
        type=Path,
        default=None,
        help="write each search's pick to this directory as MLIR text (to "
        "compare the picks of two versions of the code with diff -r)",
    )
    args = parser.parse_args(argv)
    global PICKS
    PICKS = args.picks
    print(HEADER, flush=True)
    for name in args.workloads:
        for batch in args.batch:
            if not (args.no_prune and args.prune_comparison_only):
                options = SearchOptions(
                    budget=args.budget,
                    jobs=args.jobs,
                    max_kernels=args.max_kernels,
                    bound=not args.no_bound,
                )
                report, seconds = run(name, batch, options)
                print(
                    row(name, batch, True, report, seconds, args.max_kernels),
                    flush=True,
                )
            if args.no_prune:
                # The same one-kernel-deep search with and without pruning
                # (workers are forked, so they see the cap set here).
                if args.class_cap is not None:
                    block_search.MAX_CLASSES = args.class_cap or sys.maxsize
                for prune in (True, False):
                    limit = args.layout_budget if not prune else None
                    block_search.MAX_LAYOUT_SECONDS = limit or float("inf")
                    options = SearchOptions(
                        budget=args.no_prune_budget,
                        jobs=args.jobs,
                        max_kernels=1,
                        prune=prune,
                    )
                    report, seconds = run(name, batch, options)
                    print(row(name, batch, prune, report, seconds, 1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
