"""Time one matmul at every tile size on the GPU, against torch.matmul.

A library ``kernel.matmul`` runs as the one customized kernel that
``default-customize`` builds for it: a grid of output tiles and a for-loop
over the contraction dim. This tool builds that kernel for each tile size
(rows x columns x contraction chunk), compiles it with the Triton backend
(warps and pipeline stages autotuned), checks it against ``torch.matmul`` and
times both as ``tools/bench.py`` does (20 calls in a CUDA graph, L2 flushed
before each, the flushes subtracted, the median). The tile the default
lowering picks is marked, so what its choice is worth can be read off::

    python tools/bench_matmul_tiles.py                      # the decoder layer's shapes
    python tools/bench_matmul_tiles.py --shapes 16x4096x1024 --out DIR

Shapes are ``MxNxK`` (``[M, K] @ [K, N]``, fp16). Writes
``matmul_tiles.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

from mirage_xdsl.ir.builder import new_kernel_graph, new_threadblock_graph
from mirage_xdsl.lowering.default_customize import THREADS
from mirage_xdsl.lowering.default_customize import matmul as default_matmul

LAYER_SHAPES = ("256x2048x2048", "256x512x2048", "256x5632x2048", "256x2048x5632")
"""The matmuls of the decoder layer of ``tools/torch_models.py`` (256 tokens):
the q and output projections, the k/v projections, the MLP's gate and up
projections, and its down projection."""
ROWS = (64, 128)
COLS = (16, 32, 64, 128, 256)
CHUNKS = (32, 64, 128)


def parse_shape(text: str) -> tuple[int, int, int]:
    m, n, k = (int(v) for v in text.lower().split("x"))
    return m, n, k


def tiled_matmul(m: int, n: int, k: int, tile: tuple[int, int, int]):
    """``[m, k] @ [k, n]`` as one kernel of ``tile`` (rows, columns, chunk)."""
    rows, cols, chunk = tile
    g = new_kernel_graph("mm")
    x, w = g.new_input((m, k)), g.new_input((k, n))
    bg = new_threadblock_graph((n // cols, m // rows, 1), THREADS, k // chunk)
    loop = k // chunk > 1
    tx = bg.new_input(x, (-1, 0, -1), 1 if loop else -1)
    tw = bg.new_input(w, (1, -1, -1), 0 if loop else -1)
    product = bg.matmul(tx, tw)
    bg.new_output(bg.forloop_accum(product) if loop else product, (1, 0, -1))
    (y,) = g.customized([x, w], bg)
    g.mark_output(y)
    return g.module()


def default_tile(m: int, n: int, k: int) -> tuple[int, int, int]:
    """The tile ``default-customize`` gives a plain ``kernel.matmul``."""
    g = new_kernel_graph("mm")
    x, w = g.new_input((m, k)), g.new_input((k, n))
    y = g.matmul(x, w)
    g.mark_output(y)
    op = next(o for o in g.module().walk() if o.name == "kernel.matmul")
    bg = default_matmul(op)  # type: ignore[arg-type]
    tiles = [
        tuple(o.results[0].type.get_shape())
        for o in bg.block.ops
        if o.name == "block.input"
    ]
    (rows, chunk), (_, cols) = tiles
    return rows, cols, chunk


def tiles_for(
    m: int, n: int, k: int, rows=ROWS, cols=COLS, chunks=CHUNKS
) -> list[tuple[int, int, int]]:
    return [
        (r, c, ch)
        for r, c, ch in itertools.product(rows, cols, chunks)
        if m % r == 0 and n % c == 0 and k % ch == 0 and r * ch + ch * c <= 48 * 1024
    ]


def run(
    shapes: list[tuple[int, int, int]],
    budget: float,
    rows: tuple[int, ...] = ROWS,
    cols: tuple[int, ...] = COLS,
    chunks: tuple[int, ...] = CHUNKS,
) -> list[dict]:
    import torch

    from mirage_xdsl.runtime.api import compile
    from mirage_xdsl.runtime.timer import BATCH, GraphTimer

    timer = GraphTimer()
    deadline = time.monotonic() + budget
    out_rows: list[dict] = []
    for m, n, k in shapes:
        x = torch.randn(m, k, device="cuda", dtype=torch.float16)
        w = torch.randn(k, n, device="cuda", dtype=torch.float16) / k**0.5
        ref = x.float() @ w.float()
        out = torch.empty(m, n, device="cuda", dtype=torch.float16)

        def library(x=x, w=w, out=out):
            torch.matmul(x, w, out=out)

        torch_us = timer.per_call_us([library], BATCH)
        flops = 2 * m * n * k
        base = {"shape": f"{m}x{n}x{k}", "torch_us": torch_us}
        print(json.dumps({**base, "tile": "torch.matmul", "us": torch_us}), flush=True)
        chosen = default_tile(m, n, k)
        for tile in tiles_for(m, n, k, rows, cols, chunks) + (
            [] if chosen in tiles_for(m, n, k, rows, cols, chunks) else [chosen]
        ):
            if time.monotonic() > deadline:
                return out_rows
            row = {**base, "tile": "x".join(map(str, tile)), "default": tile == chosen}
            try:
                compiled = compile(tiled_matmul(m, n, k, tile), backend="triton")
                (got,) = compiled.run(x, w)
                row["rel_l2"] = float((got.float() - ref).norm() / ref.norm())
                y = torch.empty(m, n, device="cuda", dtype=torch.float16)

                def call(c=compiled, x=x, w=w, y=y):
                    c.run(x, w, outputs=[y])

                row["us"] = timer.per_call_us([call], BATCH)
                row["tflops"] = flops / row["us"] / 1e6
                row["vs_torch"] = torch_us / row["us"]
                compiled.close()
            except Exception as e:  # a tile the GPU refuses is no answer
                row["error"] = (str(e).splitlines() or [type(e).__name__])[0][:120]
            print(json.dumps(row), flush=True)
            out_rows.append(row)
    return out_rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=list(LAYER_SHAPES))
    p.add_argument("--budget", type=float, default=480.0, help="seconds in all")
    p.add_argument("--rows", nargs="+", type=int, default=list(ROWS))
    p.add_argument("--cols", nargs="+", type=int, default=list(COLS))
    p.add_argument("--chunks", nargs="+", type=int, default=list(CHUNKS))
    p.add_argument("--out", type=Path, default=Path("."))
    args = p.parse_args(argv)
    shapes = [parse_shape(s) for s in args.shapes]
    sizes = (tuple(args.rows), tuple(args.cols), tuple(args.chunks))
    rows = run(shapes, args.budget, *sizes)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "matmul_tiles.json").write_text(json.dumps(rows, indent=1))
    for shape in dict.fromkeys(r["shape"] for r in rows):
        mine = [r for r in rows if r["shape"] == shape and "us" in r]
        best = min(mine, key=lambda r: r["us"], default=None)
        default = next((r for r in mine if r.get("default")), None)
        if best is None:
            continue
        print(
            f"{shape}: torch.matmul {best['torch_us']:.1f} us; best tile "
            f"{best['tile']} {best['us']:.1f} us ({best['vs_torch']:.2f}x torch)"
            + (f"; default {default['tile']} {default['us']:.1f} us" if default else "")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
