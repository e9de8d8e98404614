"""Time the split-K default build of skinny matmuls over its parameters.

A decode projection (``[M, K] x [K, N]``, ``M <= 16``) runs at the speed
it reads its weight. ``lowering/split_k.py`` chooses, from the shapes, the
column strip a block owns, the weight chunk it loads per for-loop iteration
and the number of slices ``K`` is split into. This script builds the same
program under every combination of those three (each through
``mirage_xdsl.compile``, Triton, autotuned) and times each as
``tools/bench_projections.py`` times a call (a CUDA graph, L2 flushed before
each call, median), beside ``torch.matmul`` (cuBLAS) of the same shapes and
the plan the default lowering picks, so the rule can be checked against the
device:

    python tools/sweep_split_k.py                       # the 1B and 8B layers' shapes
    python tools/sweep_split_k.py --shapes 2048x8192 --rows 1 8
    python tools/sweep_split_k.py --transposed          # the weight as nn.Linear keeps it

Each row prints µs, and GB/s of the weight read.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time

from mirage_xdsl.ir.builder import new_kernel_graph

SHAPES = ("2048x8192", "8192x2048", "2048x3072", "2048x2048", "4096x14336")
STRIPS = (32, 64, 128)
TILE_BYTES = (16 << 10, 32 << 10)
TRANSPOSED_STRIPS = (4, 16, 64)
TRANSPOSED_TILE_BYTES = (8 << 10, 16 << 10)
"""A transposed weight's columns are contiguous: narrow strips read whole
lines too."""
ONE_ROW_STRIPS = (1, 2, 4)
ONE_ROW_TILE_BYTES = (2 << 10, 4 << 10, 8 << 10)
"""One row of a transposed weight: single columns (or a few joined) in
chunks of a few KB, the default's form, and the sizes around it."""
SPLITS = (1, 2, 4, 8)


def program(m: int, k: int, n: int, transposed: bool):
    """``x @ w`` with ``w`` as ``[K, N]``, or as ``[N, K]`` transposed in the
    program (an ``nn.Linear`` weight)."""
    g = new_kernel_graph(f"proj_{m}x{k}x{n}")
    x = g.new_input((m, k))
    w = g.transpose(g.new_input((n, k)), 0, 1) if transposed else g.new_input((k, n))
    g.mark_output(g.matmul(x, w))
    return g.module()


def plans(k: int, n: int, elem: int, transposed: bool = False, rows: int = 16):
    """Every (strip, chunk, splits) the split-K kernels can take at ``k, n``
    (one row of a transposed weight: the one-row grid)."""
    from mirage_xdsl.lowering.split_k import SplitK

    strips = TRANSPOSED_STRIPS if transposed else STRIPS
    tiles = TRANSPOSED_TILE_BYTES if transposed else TILE_BYTES
    if transposed and rows == 1:
        strips, tiles = ONE_ROW_STRIPS, ONE_ROW_TILE_BYTES
    for strip, tile, splits in itertools.product(strips, tiles, SPLITS):
        if n % strip:
            continue
        k_tile = tile // (strip * elem)
        if k_tile < 16 or k % (k_tile * splits):
            continue
        yield SplitK(strip, k_tile, splits, k)


def build(m, k, n, transposed, plan):
    """The compiled program, the default lowering made to use ``plan``
    (the default's own when ``plan`` is None)."""
    import mirage_xdsl.lowering.default_customize as dc
    from mirage_xdsl.runtime.api import compile

    chosen = dc.plan_split_k
    if plan is not None:
        dc.plan_split_k = lambda *a, **kw: plan
    try:
        return compile(program(m, k, n, transposed), backend="triton")
    finally:
        dc.plan_split_k = chosen


def sweep(timer, shape: str, m: int, transposed: bool, deadline: float) -> list:
    """Rows for one shape at ``m`` rows: cuBLAS, the default plan, then every
    plan until ``deadline``."""
    import torch

    from mirage_xdsl.gpu_target import current
    from mirage_xdsl.lowering.split_k import plan_split_k

    k, n = map(int, shape.split("x"))
    x = torch.randn(m, k, device="cuda", dtype=torch.float16)
    w = torch.randn(n, k, device="cuda", dtype=torch.float16) / k**0.5
    weight = w if transposed else w.t().contiguous()
    want = x.float() @ w.float().t()
    rows = []

    def record(what: str, call, plan=None) -> None:
        us = timer.per_call_us([call], 20)
        row = {"shape": shape, "rows": m, "what": what, "us": round(us, 2)}
        if plan is not None:
            row.update(strip=plan.n_tile, k_tile=plan.k_tile, splits=plan.splits)
        rows.append(row)
        gbs = k * n * 2 / 1e3 / us
        print(
            f"{shape:>10} m={m:<2} {what:<30} {us:7.2f} µs {gbs:6.0f} GB/s", flush=True
        )

    record("torch.matmul", lambda: torch.matmul(x, w.t()))
    default = plan_split_k(m, n, k, 2, current(), k_major=transposed)
    for plan in [None, *plans(k, n, 2, transposed, m)]:
        if time.monotonic() > deadline:
            print("stopped: budget", flush=True)
            break
        try:
            compiled = build(m, k, n, transposed, plan)
            outs = compiled.run(x, weight)
            err = float((outs[0].float() - want).norm() / want.norm())
            if err > 2e-2:
                print(f"{shape} {plan}: wrong (rel L2 {err:.2e})")
                continue
            shown = plan or default
            name = f"{'default ' if plan is None else ''}strip {shown.n_tile} k {shown.k_tile} split {shown.splits}"
            call = compiled.run
            record(name, lambda c=call, o=outs: c(x, weight, outputs=o), plan)
        except Exception as e:  # one plan failing is one line
            print(f"{shape} {plan}: error: {str(e).splitlines()[0][:120]}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), help="KxN")
    parser.add_argument("--rows", nargs="*", type=int, default=[1])
    parser.add_argument("--transposed", action="store_true")
    parser.add_argument("--budget", type=float, default=400.0, help="seconds")
    parser.add_argument(
        "--shape-budget", type=float, help="seconds per shape and row count"
    )
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)

    from mirage_xdsl.gpu_target import current
    from mirage_xdsl.runtime.driver import gpu_unavailable_reason
    from mirage_xdsl.runtime.timer import GraphTimer

    # opening the GPU makes it the target the default plans are made for
    if (reason := gpu_unavailable_reason()) is not None:
        print(f"sweep_split_k: {reason}", file=sys.stderr)
        return 1
    print(f"planning for the {current().name}", flush=True)
    timer = GraphTimer(reps=30, warmup=3)
    deadline = time.monotonic() + args.budget
    rows = []
    for shape, m in itertools.product(args.shapes, args.rows):
        until = deadline
        if args.shape_budget:
            until = min(deadline, time.monotonic() + args.shape_budget)
        found = sweep(timer, shape, m, args.transposed, until)
        rows.extend(found)
        if found:
            best = min(found, key=lambda r: r["us"])
            print(f"best {shape} m={m}: {best}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
