"""Decode attention over a long KV cache: the search's µGraph against torch SDPA.

``F.scaled_dot_product_attention(q, k, v, enable_gqa=True)`` for one query
token (GQA: ``--heads`` query heads over ``--kv-heads`` key heads of
``--head-dim``, ``--keys`` cached keys, fp16) is captured from torch and
searched from the plain captured program (the safe softmax); the search
should split the keys over blocks with the online softmax (FlashDecoding:
each block's part maximum beside its shifted partial sums, then a combine).
Prints what the search picked (kernels, whether the grid splits the keys,
the combine's shifted accumulations) and, on a GPU, the time per call of the
µGraph, of torch SDPA on each backend (flash, efficient, cuDNN, math), of
eager dispatch and of ``torch.compile``, timed alike in one run (calls in a
CUDA graph, L2 flushed before each, the flushes' own time subtracted), with
the floor: q, k, v and the output moved once at the copy bandwidth measured
in the same run. Without a GPU (or with ``--dry-run``) only the search runs,
ranked by the cost model::

    python tools/bench_decode_attention.py [--keys 4096] [--batch 1]
        [--budget 240] [--dry-run] [--out DIR]

On the H100 with 16 cores: a 240 s search (timing its candidates), then a
few seconds of compiling and timing; about 5 minutes in all. Writes
``decode_attention.json`` and ``decode_attention.mlir`` (the µGraph) to
``--out`` (default ``$OUT``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from mirage_xdsl.dialects import block, kernel


def decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def inputs(args: argparse.Namespace, device: str) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).half().to(device)

    b, d = args.batch, args.head_dim
    return [
        rand(b, args.heads, 1, d),
        rand(b, args.kv_heads, args.keys, d),
        rand(b, args.kv_heads, args.keys, d),
    ]


def shape_of(module) -> dict:
    """What the µGraph does: its kernels, whether a grid splits the keys
    (a block reads a share of them), and the shifted accumulations."""
    customized = [op for op in module.walk() if isinstance(op, kernel.CustomizedOp)]
    kernels = [
        op
        for op in next(iter(module.body.block.ops)).body.block.ops
        if op.name.startswith("kernel.") and op.name not in ("kernel.reshape",)
    ]
    return {
        "kernels": len(kernels),
        "customized": [
            {
                "grid": list(op.grid_dims),
                "forloop": op.forloop,
                "reduce_max": any(isinstance(o, block.ReduceMaxOp) for o in op.walk()),
                "shifted_accums": sum(
                    1
                    for o in op.walk()
                    if isinstance(o, block.ForloopAccumOp) and o.shift is not None
                ),
            }
            for op in customized
        ],
    }


def time_us(call) -> float:
    from mirage_xdsl.runtime.timer import BATCH as CALLS
    from mirage_xdsl.runtime.timer import GraphTimer

    return GraphTimer().per_call_us([call], CALLS)


def copy_tbps() -> float:
    """TB/s of a 1 GiB copy kernel, counting bytes read and written."""
    from mirage_xdsl.runtime.bandwidth import copy_bandwidth

    return copy_bandwidth() / 1e12


def torch_times(xs: list[torch.Tensor]) -> dict[str, float | str]:
    """SDPA on each backend, eager dispatch and torch.compile."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out: dict[str, float | str] = {
        "sdpa (eager dispatch)": time_us(lambda: decode(*xs))
    }
    for name, backend in (
        ("flash", SDPBackend.FLASH_ATTENTION),
        ("efficient", SDPBackend.EFFICIENT_ATTENTION),
        ("cudnn", SDPBackend.CUDNN_ATTENTION),
        ("math", SDPBackend.MATH),
    ):
        try:
            with sdpa_kernel([backend]):
                decode(*xs)
                out[f"sdpa {name}"] = time_us(lambda: decode(*xs))
        except RuntimeError as e:  # a backend that does not take these inputs
            out[f"sdpa {name}"] = f"unavailable: {str(e).splitlines()[0][:80]}"
    torch._dynamo.reset()
    compiled = torch.compile(decode)
    compiled(*xs)
    out["torch.compile"] = time_us(lambda: compiled(*xs))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--keys", type=int, default=4096)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--budget", type=float, default=240.0, help="search seconds")
    p.add_argument("--dry-run", action="store_true", help="search only, no GPU")
    p.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT", "decode-attention-out"))
    )
    args = p.parse_args(argv)
    gpu = torch.cuda.is_available() and not args.dry_run
    from mirage_xdsl.torch import superoptimize

    xs = inputs(args, "cuda" if gpu else "cpu")
    start = time.monotonic()
    options = {} if gpu else {"measure": None}
    found = superoptimize(decode, xs, budget=args.budget, **options)
    row: dict = {
        "shape": {k: getattr(args, k) for k in ("heads", "kv_heads", "head_dim")}
        | {"keys": args.keys, "batch": args.batch},
        "search_s": round(time.monotonic() - start, 1),
        "found": shape_of(found.module),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "decode_attention.mlir").write_text(str(found.module))
    if gpu:
        with torch.no_grad():
            ref = decode(*[x.float() for x in xs])
            got = found(*xs)
            row["rel_l2_vs_fp32"] = float((got.float() - ref).norm() / ref.norm())
            tbps = copy_tbps()
            moved = sum(x.numel() * x.element_size() for x in [*xs, got])
            row["floor_us"] = moved / (tbps * 1e12) * 1e6
            row["copy_tbps"] = tbps
            row["us"] = {"mirage": time_us(lambda: found(*xs)), **torch_times(xs)}
    (args.out / "decode_attention.json").write_text(json.dumps(row, indent=1))
    print(json.dumps(row, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
