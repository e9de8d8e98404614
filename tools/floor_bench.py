"""What the benchmarks against the memory floor share: their command line,
their report cells and how they write their results.

``tools/bench_projections.py`` and ``tools/bench_model_ops.py`` time each
method of each case against the fewest bytes the case must move at the
bandwidth of a 1 GiB copy; both are run the same way and write
``<name>.json`` and ``<name>.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path


def parser(description: str, *, budget: float, search_cap: float, only: str):
    """The options every floor benchmark takes (``only`` says what ``--only``
    names); a tool adds its own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument(
        "--budget",
        type=float,
        default=budget,
        help=f"seconds to start methods in (default {budget:g}; the last one "
        "started, a max-autotune compile say, may run a minute past it)",
    )
    p.add_argument(
        "--search-cap",
        type=float,
        default=search_cap,
        help=f"seconds per search (default {search_cap:g})",
    )
    p.add_argument("--search-cache", default=None)
    p.add_argument(
        "--only",
        type=lambda s: s.split(","),
        default=None,
        help=only,
    )
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--no-search", action="store_true")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    return p


def numel(shape) -> int:
    return math.prod(shape)


def floor_cell(case, method: str, copy: float) -> str:
    """``method``'s µs on ``case`` and its share of the floor, or its status."""
    us = case.us.get(method)
    if us is None:
        return case.status.get(method, "—")
    floor_us = case.floor_bytes / copy * 1e6
    return f"{us:.1f} ({100 * floor_us / us:.0f}%)"


def floor_us(case, copy: float) -> str:
    """The µs ``case`` takes at the floor: its fewest bytes at ``copy`` B/s."""
    return f"{case.floor_bytes / copy * 1e6:.1f}"


def report(copy: float, columns: list[str], rows: list[list[str]]) -> str:
    """The markdown report: the copy bandwidth, then one row a case."""
    lines = [
        f"Copy bandwidth {copy / 1e12:.2f} TB/s. Each cell: µs per call "
        "(% of the floor: fewest bytes / copy bandwidth).",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + " --- |" * len(columns),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def one_line(e: Exception) -> str:
    """The first non-blank line of an error, for a report cell."""
    lines = [s for s in str(e).splitlines() if s.strip()]
    return (lines[0] if lines else type(e).__name__)[:160]


def main(
    args,
    name: str,
    run: Callable,
    dry_run: Callable,
    markdown: Callable[[list, float], str],
) -> int:
    """Dry-run, or run the cases and write ``name``.json and ``name``.md."""
    if args.dry_run:
        return dry_run(args)
    todo, copy = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = {"copy_bytes_per_s": copy, "cases": [asdict(c) for c in todo]}
    (out / f"{name}.json").write_text(json.dumps(data, indent=1))
    table = markdown(todo, copy)
    (out / f"{name}.md").write_text(table)
    print(table)
    return 0
