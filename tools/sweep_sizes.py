"""Time a µGraph at other grid and for-loop sizes on the GPU.

For each customized kernel of each program, the grid dims and the for-loop
range are scaled by powers of two (one kernel at a time, grid and loop
together); every variant that still verifies as IR is checked against the
original on the GPU (relative L2 of the outputs on the same inputs) and timed
as the benchmark times (CUDA graph, L2 flushed before each call, flushes
subtracted, median, 20 calls per graph). Prints one line per variant and
writes ``sweep_sizes.json`` to ``--out``: what the size choices of the search
space are worth on this GPU.

    python tools/sweep_sizes.py examples/rmsnorm_linear_splitk.mlir found.mlir \
        --out results --budget 500
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import parse
from mirage_xdsl.runtime.check import relative_l2
from mirage_xdsl.search.ugraph import KernelOp, UGraph, from_function, to_module

SCALES = (0.25, 0.5, 1, 2, 4)


def _scaled(n: int, s: float) -> int | None:
    m = n * s
    return int(m) if m >= 1 and m == int(m) else None


def variants(ug: UGraph, limit: int) -> list[tuple[str, UGraph]]:
    """Valid µGraphs with one customized kernel's grid and for-loop rescaled,
    the smallest changes first."""
    out: list[tuple[float, str, UGraph]] = []
    seen = {ug}
    for k, op in enumerate(ug.ops):
        if op.graph is None:
            continue
        g = op.graph
        grid_choices = []
        for d in range(3):
            opts = {_scaled(g.grid[d], s) for s in SCALES} - {None}
            grid_choices.append(sorted(opts) if g.grid[d] > 1 else [1])
        loop_choices = sorted({_scaled(g.forloop, s) for s in SCALES} - {None})
        for grid in itertools.product(*grid_choices):
            for loop in loop_choices:
                new = replace(g, grid=tuple(grid), forloop=loop)
                ops = list(ug.ops)
                ops[k] = KernelOp(op.kind, op.operands, op.attrs, new)
                cand = replace(ug, ops=tuple(ops))
                if cand in seen:
                    continue
                seen.add(cand)
                try:
                    to_module(cand)
                except Exception:  # sizes that do not divide, or overflow shared memory
                    continue
                change = sum(
                    abs(math.log2(a / b))
                    for a, b in zip((*grid, loop), (*g.grid, g.forloop), strict=True)
                )
                out.append((change, f"k{k} grid {list(grid)} forloop {loop}", cand))
    out.sort(key=lambda x: x[0])
    return [(name, cand) for _, name, cand in out[:limit]]


def _check(ref, got, inputs) -> float:
    """Largest relative L2 of ``got``'s outputs against ``ref``'s on the same
    inputs (``inf`` for a shape that differs or a value that is not finite)."""
    a = ref.run(*inputs)
    b = got.run(*inputs)
    a = a if isinstance(a, tuple | list) else (a,)
    b = b if isinstance(b, tuple | list) else (b,)
    err = 0.0
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape:
            return float("inf")
        err = max(err, relative_l2(y.float().cpu().numpy(), x.float().cpu().numpy()))
    return err


def sweep(path: Path, timer, deadline: float, limit: int) -> list[dict]:
    from mirage_xdsl.runtime.api import compile
    from mirage_xdsl.runtime.measure import random_tensors
    from mirage_xdsl.runtime.timer import BATCH

    module = parse(make_context(), path.read_text(), str(path))
    fn = next(iter(module.ops))
    ug = from_function(fn)
    ref = compile(module, backend="triton")
    inputs, _ = random_tensors(ref)
    rows = []
    for name, cand in [("as written", ug), *variants(ug, limit)]:
        if time.monotonic() > deadline:
            break
        row = {"program": str(path), "variant": name}
        try:
            compiled = compile(to_module(cand), backend="triton")
        except Exception as e:  # an invalid size combination is no variant
            row["error"] = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
            rows.append(row)
            continue
        try:
            row["rel_l2"] = _check(ref, compiled, inputs)
            if row["rel_l2"] < 2e-2:
                ins, outs = random_tensors(compiled)

                def call(c=compiled, xs=ins, ys=outs):
                    c.run(*xs, outputs=ys)

                row["us"] = timer.per_call_us([call], BATCH)
        except Exception as e:
            row["error"] = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
        finally:
            compiled.close()
        print(json.dumps(row), flush=True)
        rows.append(row)
    ref.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("programs", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=Path("."))
    p.add_argument("--budget", type=float, default=500.0, help="seconds in all")
    p.add_argument("--limit", type=int, default=30, help="variants per program")
    args = p.parse_args(argv)
    from mirage_xdsl.runtime.timer import GraphTimer

    timer = GraphTimer()
    start = time.monotonic()
    rows: list[dict] = []
    for i, path in enumerate(args.programs):
        left = args.budget - (time.monotonic() - start)
        share = left / (len(args.programs) - i)
        rows += sweep(path, timer, time.monotonic() + share, args.limit)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sweep_sizes.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
