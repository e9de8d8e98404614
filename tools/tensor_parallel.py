#!/usr/bin/env python3
"""Tensor-parallel µGraphs on two GPUs against one GPU and against torch.

A Llama-3-8B-shaped MLP block (hidden 4096, FFN 14336) and decode attention
block (32 query / 8 key-value heads of 128, 1024 cached keys), fp16, at each
--batches size, split over the GPUs the Megatron way
(``mirage_xdsl.torch.tensor_parallel``: gate/up and q/k/v by columns, down and
o by rows, one all-reduce per block). For each block and batch, in one run:

- the sharded program is verified against the unsharded one (finite field);
- ours, tensor-parallel: each GPU runs its shard's µGraph (the search's pick,
  found on GPU 0 under --search-cap seconds, the same program on every GPU)
  with an NCCL all-reduce between kernels (``runtime/distributed.py``);
- ours, one GPU: the unsharded program searched the same way;
- torch, tensor-parallel: each GPU runs its shard of the torch module (eager
  kernels) with ``torch.distributed.all_reduce``;
- torch, one GPU: the torch module, eager.

Every output is checked against torch's single-GPU result first. Timing is
``tools/bench.py``'s: each method's calls captured in a CUDA graph (the NCCL
all-reduce inside it), the L2 flushed before each call, the flushes' time
subtracted, the median per call; a two-GPU time is the slower GPU's. A
method whose graph cannot be captured is timed eagerly, and says so.

Run with one process per GPU:

  torchrun --nproc-per-node 2 tools/tensor_parallel.py --out $OUT

or ``python tools/tensor_parallel.py --out $OUT``, which starts the two
processes itself. Writes tensor_parallel.json and tensor_parallel.md to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.distributed as dist

from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import parse
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.runtime.distributed import ShardRunner, join_group, spawn
from mirage_xdsl.runtime.timer import BATCH, GraphTimer
from mirage_xdsl.semantics.sharding import REPLICATE, Shard
from mirage_xdsl.torch.blocks import DecodeAttention, GatedMLP, initialise
from mirage_xdsl.torch.parallel import TensorParallel, tensor_parallel

HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM, KEYS = 4096, 14336, 32, 8, 128, 1024
BANDWIDTH = 3.0e12
"""Bytes per second one H100 reads (the floor: bytes ÷ this)."""
TOLERANCE = 2e-2
"""Relative L2 error allowed against torch's fp16 result."""


def block(name: str, batch: int):
    """The module, its unsharded example inputs and their placements."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch, HIDDEN, generator=g).half()
    if name == "mlp":
        module = initialise(GatedMLP(HIDDEN, FFN)).half()
        return module, [x], [REPLICATE]
    module = initialise(DecodeAttention(HIDDEN, HEADS, KV_HEADS, HEAD_DIM)).half()
    cache = [
        torch.randn(batch, KV_HEADS, KEYS, HEAD_DIM, generator=g).half()
        for _ in range(2)
    ]
    return module, [x, *cache], [REPLICATE, Shard(1), Shard(1)]


def flat(y) -> list[torch.Tensor]:
    return list(y) if isinstance(y, (tuple, list)) else [y]


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.float(), want.float()
    return float((got - want).norm() / want.norm().clamp_min(1e-30))


def slowest(value: float) -> float:
    """The largest of every process's ``value``."""
    t = torch.tensor([value], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def share_text(text: str | None) -> str:
    """Rank 0's text, on every rank."""
    box = [text]
    dist.broadcast_object_list(box, src=0)
    return box[0]  # type: ignore[return-value]


def searched(module, cap: float, rank: int) -> tuple[str, float]:
    """The search's pick for ``module`` (found on rank 0), as text on every
    rank, and the search's seconds."""
    start = time.monotonic()
    text = None
    if rank == 0:
        from mirage_xdsl.torch.function import search

        text = module_text(search(module, budget=cap) if cap > 0 else module)
    return share_text(text), time.monotonic() - start


def timed(
    timer: GraphTimer, call: Callable[[], object], reps: int
) -> tuple[float, str]:
    """Median µs per call: CUDA graph of BATCH calls with flushes, or eager."""
    dist.barrier()
    try:
        return timer.per_call_us([call], BATCH), "graph"
    except Exception as e:  # a method that cannot be captured is timed eagerly
        print(
            f"[rank {dist.get_rank()}] graph capture failed ({e}); eager",
            file=sys.stderr,
        )
        torch.cuda.synchronize()
        dist.barrier()
        return eager_us(timer, call, reps), "eager"


def eager_us(timer: GraphTimer, call: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        timer.flush_buffer.fill_(1)
        start, end = (
            torch.cuda.Event(enable_timing=True),
            torch.cuda.Event(enable_timing=True),
        )
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return sorted(times)[len(times) // 2]


def check(
    outs: Sequence[torch.Tensor],
    want: Sequence[torch.Tensor],
    tp: TensorParallel,
    rank: int,
) -> float:
    """The largest relative error of this shard's outputs against its pieces
    of the unsharded torch result."""
    worst = 0.0
    for got, full, placement in zip(outs, want, tp.program.outputs, strict=True):
        if isinstance(placement, Shard):
            full = full.chunk(tp.shards, placement.dim)[rank]
        worst = max(worst, rel_error(got, full))
    return worst


def run_config(name: str, batch: int, args, rank: int, timer: GraphTimer) -> dict:
    module, xs, placements = block(name, batch)
    tp = tensor_parallel(module, dist.get_world_size(), xs, placements)
    row: dict = {"block": name, "batch": batch, "shards": tp.shards}
    if rank == 0:
        verdict = tp.verify()
        row["verified"] = bool(verdict)
        row["verdict"] = (
            f"{verdict.reason} (false-positive bound {verdict.false_positive_bound:.1e})"
        )
    shard_text, row["search_s_shard"] = searched(
        tp.program.module, args.search_cap, rank
    )
    tp.program.module = parse(make_context(), shard_text, "<shard>")
    full_text, row["search_s_one_gpu"] = searched(
        tp.reference.module, args.search_cap, rank
    )

    device = torch.device("cuda", torch.cuda.current_device())
    gpu_xs = [x.to(device) for x in xs]
    want = [y.detach() for y in flat(module.to(device)(*gpu_xs))]
    shard_args = [x.to(device) for x in tp.shard_inputs(rank, *xs)]
    runner = ShardRunner(tp.program, backend=args.backend)
    row["error_tp"] = slowest(check(runner(*shard_args), want, tp, rank))
    row["bytes_per_gpu"] = sum(x.numel() * x.element_size() for x in shard_args)
    torch_shard = tp.modules[rank].to(device)
    torch_shard_xs = shard_args[: len(xs)]
    row["error_torch_tp"] = slowest(
        check(flat(torch_shard(*torch_shard_xs)), want, tp, rank)
    )

    methods = {
        "ours_tp": lambda: runner(*shard_args),
        "torch_tp": lambda: torch_shard(*torch_shard_xs),
    }
    for key, call in methods.items():
        us, mode = timed(timer, call, args.reps)
        row[key], row[f"{key}_mode"] = slowest(us), mode
    if rank == 0:
        import mirage_xdsl

        one = mirage_xdsl.compile(
            parse(make_context(), full_text, "<one gpu>"), backend=args.backend
        )
        one_args = [*gpu_xs, *(p.to(device) for p in tp.reference.parameters)]
        ours = flat(one(*one_args))
        row["error_one_gpu"] = max(
            rel_error(a, b) for a, b in zip(ours, want, strict=True)
        )
        for key, call in {
            "ours_one_gpu": lambda: one(*one_args),
            "torch_one_gpu": lambda: module(*gpu_xs),
        }.items():
            row[key] = timer.per_call_us([call], BATCH)
            row[f"{key}_mode"] = "graph"
        row["floor_one_gpu"] = (
            sum(x.numel() * x.element_size() for x in one_args) / BANDWIDTH * 1e6
        )
    row["floor_tp"] = row["bytes_per_gpu"] / BANDWIDTH * 1e6
    row["correct"] = all(
        row.get(k, 0.0) <= TOLERANCE
        for k in ("error_tp", "error_torch_tp", "error_one_gpu")
    )
    dist.barrier()
    return row


def fmt(us: float | None) -> str:
    return "—" if us is None else f"{us:.1f}"


def cell(row: dict, key: str) -> str:
    """A time, marked when it was taken eagerly (no CUDA graph)."""
    eager = row.get(f"{key}_mode") == "eager"
    return fmt(row.get(key)) + (" (eager)" if eager else "")


def markdown(rows: list[dict], device: str) -> str:
    lines = [
        f"Tensor parallel over {rows[0]['shards']} GPUs ({device}), fp16, µs per step "
        "(CUDA graph, L2 flushed, median; two-GPU times are the slower GPU's)",
        "",
        "| block | batch | ours TP | torch TP | ours 1 GPU | torch 1 GPU | floor TP / 1 GPU "
        "| TP speed-up over ours 1 GPU | ours TP vs torch TP | verified | correct |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['block']} | {r['batch']} | {cell(r, 'ours_tp')} "
            f"| {cell(r, 'torch_tp')} | {cell(r, 'ours_one_gpu')} "
            f"| {cell(r, 'torch_one_gpu')} "
            f"| {fmt(r['floor_tp'])} / {fmt(r['floor_one_gpu'])} "
            f"| {r['ours_one_gpu'] / r['ours_tp']:.2f}x "
            f"| {r['torch_tp'] / r['ours_tp']:.2f}x "
            f"| {'yes' if r['verified'] else 'NO'} | {'yes' if r['correct'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--blocks",
        nargs="+",
        default=["mlp", "attention"],
        choices=["mlp", "attention"],
    )
    parser.add_argument(
        "--search-cap",
        type=float,
        default=15.0,
        help="seconds per search; 0: no search",
    )
    parser.add_argument("--backend", default="auto", choices=["auto", "triton", "cuda"])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument(
        "--shards", type=int, default=2, help="GPUs, when not under torchrun"
    )
    args = parser.parse_args(argv)
    if "RANK" not in os.environ:
        spawn(_worker, args.shards, args, backend="nccl")
        return 0
    join_group("nccl")
    _worker(dist.get_rank(), args)
    dist.destroy_process_group()
    return 0


def _worker(rank: int, args) -> None:
    timer = GraphTimer(reps=args.reps)
    rows = []
    start = time.monotonic()
    for name in args.blocks:
        for batch in args.batches:
            rows.append(run_config(name, batch, args, rank, timer))
            if rank == 0:
                print(f"{name} b{batch}: {json.dumps(rows[-1])}", flush=True)
    if rank != 0:
        return
    table = markdown(rows, torch.cuda.get_device_name())
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tensor_parallel.md").write_text(table)
    summary = {
        "rows": rows,
        "seconds": time.monotonic() - start,
        "device": torch.cuda.get_device_name(),
    }
    (out / "tensor_parallel.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    sys.exit(main())
