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

With --dtensor, each block and batch also gets a second row from a model
sharded the way torch users shard it: the block on a 1-d device mesh over
the GPUs, ``parallelize_module(block, mesh, {"gate_proj": ColwiseParallel(),
..., "down_proj": RowwiseParallel()})``, taken through
``mirage_xdsl.torch.from_dtensor``. Its "ours TP" is that program (verified
again; the search's pick reused when it is the same program as the first
row's, searched again otherwise), its "torch TP" the DTensor module itself
(torch's own tensor parallelism); its one-GPU columns are the first row's.

Every output is checked against torch's single-GPU result first. Timing is
``tools/bench.py``'s: each method's calls captured in a CUDA graph (the NCCL
all-reduce inside it), the L2 flushed before each call, the flushes' time
subtracted, the median per call; a two-GPU time is the slower GPU's. A
method whose graph cannot be captured is timed eagerly, and says so.

Run with one process per GPU:

  torchrun --nproc-per-node 2 tools/tensor_parallel.py --out $OUT

or ``python tools/tensor_parallel.py --out $OUT``, which starts the two
processes itself. Writes tensor_parallel.json and tensor_parallel.md to --out.

Both programs are searched with the same options (``--segment-ops`` sets the
search's segment size for both); the table gives each one's kernel count.
``--dry-run`` runs the same steps without a GPU, on small shapes: two CPU
processes joined by gloo, every stage in the interpreter, nothing timed.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import parse
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.runtime.bandwidth import copy_bandwidth
from mirage_xdsl.runtime.distributed import ShardRunner, join_group, spawn
from mirage_xdsl.runtime.timer import BATCH, GraphTimer
from mirage_xdsl.semantics.interpreter import entry_function, run
from mirage_xdsl.semantics.sharding import REPLICATE, Shard, piece
from mirage_xdsl.torch.blocks import DecodeAttention, GatedMLP, initialise
from mirage_xdsl.torch.dtensor import from_dtensor
from mirage_xdsl.torch.parallel import TensorParallel, tensor_parallel

sys.path.insert(0, str(Path(__file__).parent))

from tensor_parallel_report import markdown, write  # noqa: E402

DRY_RUN_BANDWIDTH = 3.0e12
"""Bytes per second the dry run's floors assume; on a GPU each rank measures
its own (``runtime.bandwidth.copy_bandwidth``), and a floor is bytes ÷ that."""
TOLERANCE = 2e-2
"""Relative L2 error allowed against torch's fp16 result."""


@dataclass(frozen=True)
class Shapes:
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    keys: int


LLAMA_3_8B = Shapes(4096, 14336, 32, 8, 128, 1024)
SMALL = Shapes(64, 128, 4, 2, 16, 32)
"""The dry run's shapes."""


def block(name: str, batch: int, shapes: Shapes = LLAMA_3_8B):
    """The module, its unsharded example inputs and their placements."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch, shapes.hidden, generator=g).half()
    if name == "mlp":
        module = initialise(GatedMLP(shapes.hidden, shapes.ffn)).half()
        return module, [x], [REPLICATE]
    module = DecodeAttention(
        shapes.hidden, shapes.heads, shapes.kv_heads, shapes.head_dim
    )
    module = initialise(module).half()
    cache_shape = (batch, shapes.kv_heads, shapes.keys, shapes.head_dim)
    cache = [torch.randn(cache_shape, generator=g).half() for _ in range(2)]
    return module, [x, *cache], [REPLICATE, Shard(1), Shard(1)]


LAYERS = {
    "mlp": {"gate_proj": "colwise", "up_proj": "colwise", "down_proj": "rowwise"},
    "attention": {
        "q_proj": "colwise",
        "k_proj": "colwise",
        "v_proj": "colwise",
        "o_proj": "rowwise",
    },
}
"""Each block's linear layers and how a torch user shards them."""


def parallelized(name: str, module, device: torch.device):
    """A copy of ``module`` on ``device``, sharded over every process by
    torch's ``parallelize_module`` (DTensor parameters on a 1-d mesh)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    styles = {
        layer: ColwiseParallel() if style == "colwise" else RowwiseParallel()
        for layer, style in LAYERS[name].items()
    }
    copied = copy.deepcopy(module).requires_grad_(False).to(device)
    return parallelize_module(copied, mesh, styles)


def flat(y) -> list[torch.Tensor]:
    return list(y) if isinstance(y, (tuple, list)) else [y]


def settled(y) -> list[torch.Tensor]:
    """A module's outputs, each waited for: a DTensor module's all-reduce
    returns before it is done (an ``AsyncCollectiveTensor``)."""
    from torch.distributed._functional_collectives import AsyncCollectiveTensor

    return [t.wait() if isinstance(t, AsyncCollectiveTensor) else t for t in flat(y)]


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.detach().float(), want.detach().float()
    return float((got - want).norm() / want.norm().clamp_min(1e-30))


def slowest(value: float, device: torch.device) -> float:
    """The largest of every process's ``value``."""
    t = torch.tensor([value], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def share_text(text: str | None) -> str:
    """Rank 0's text, on every rank."""
    box = [text]
    dist.broadcast_object_list(box, src=0)
    return box[0]  # type: ignore[return-value]


def searched(module, args, rank: int) -> tuple[str, float]:
    """The search's pick for ``module`` (found on rank 0), as text on every
    rank, and the search's seconds. Every program is searched with the same
    options."""
    start = time.monotonic()
    text = None
    if rank == 0:
        from mirage_xdsl.torch.function import search

        options = {"budget": args.search_cap}
        if args.segment_ops:
            options["segment_ops"] = args.segment_ops
        text = module_text(search(module, **options) if args.search_cap > 0 else module)
    return share_text(text), time.monotonic() - start


def kernels(text: str) -> int:
    """Kernel launches of a program: its kernel ops but reshapes and sums."""
    fn = entry_function(parse(make_context(), text, "<program>"))
    skip = ("func.return", "kernel.reshape", "kernel.all_reduce")
    return sum(op.name not in skip for op in fn.body.block.ops)


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


def nbytes(xs: Sequence[torch.Tensor]) -> int:
    return sum(x.numel() * x.element_size() for x in xs)


class Config:
    """One block at one batch size, on this process's device: split by
    ``tensor_parallel`` from the unsharded block, or, with ``plain`` (that
    split's configuration), taken by ``from_dtensor`` from the block sharded
    by ``parallelize_module``."""

    def __init__(self, name: str, batch: int, args, rank: int, plain=None):
        self.args, self.rank, self.plain = args, rank, plain
        self.device = torch.device(
            "cpu" if args.dry_run else f"cuda:{torch.cuda.current_device()}"
        )
        shapes = SMALL if args.dry_run else LLAMA_3_8B
        module, xs, placements = block(name, batch, shapes)
        shards = dist.get_world_size()
        self.row: dict = {"block": name, "batch": batch, "shards": shards}
        self.row["from"] = "module" if plain is None else "DTensor"
        self.xs = [x.to(self.device) for x in xs]
        if plain is None:
            self.tp = tensor_parallel(module, shards, xs, placements)
            self.torch_shard = self.tp.modules[rank].to(self.device)
        else:
            self.torch_shard = parallelized(name, module, self.device)
            local = [
                piece(x, p, rank, shards)
                for x, p in zip(self.xs, placements, strict=True)
            ]
            self.tp = from_dtensor(self.torch_shard, local, placements)
        self.module = module.to(self.device)
        self.want = [y.detach() for y in flat(self.module(*self.xs))]

    def slowest(self, value: float) -> float:
        return slowest(value, self.device)

    def prepare(self) -> None:
        """Verify (rank 0), search, and build every method."""
        tp, row = self.tp, self.row
        if self.rank == 0:
            verdict = tp.verify()
            bound = verdict.false_positive_bound
            row["verified"] = bool(verdict)
            row["verdict"] = f"{verdict.reason} (false-positive bound {bound:.1e})"
        self.captured = module_text(tp.program.module)
        plain = self.plain
        if plain is not None:
            row["same_program"] = self.captured == plain.captured
        if row.get("same_program"):  # the search's pick for that program
            shard_text, row["search_s_shard"] = plain.shard_text, 0.0
        else:
            shard_text, row["search_s_shard"] = searched(
                tp.program.module, self.args, self.rank
            )
        self.shard_text = shard_text
        row["kernels_shard"] = kernels(shard_text)
        tp.program.module = parse(make_context(), shard_text, "<shard>")
        if plain is None:
            self.one_text, row["search_s_one_gpu"] = searched(
                tp.reference.module, self.args, self.rank
            )
            row["kernels_one_gpu"] = kernels(self.one_text)
        self.shard_args = [
            x.to(self.device) for x in tp.shard_inputs(self.rank, *self.xs)
        ]
        self.runner = ShardRunner(tp.program, backend=self.args.backend)
        self.torch_args = self.shard_args[: len(self.xs)]
        row["bytes_per_gpu"] = nbytes(self.shard_args)
        row["floor_tp"] = row["bytes_per_gpu"] / self.args.bandwidth * 1e6

    def check_two_gpus(self) -> None:
        ours = self.runner(*self.shard_args)
        row = self.row
        row["error_tp"] = self.slowest(check(ours, self.want, self.tp, self.rank))
        theirs = settled(self.torch_shard(*self.torch_args))
        row["error_torch_tp"] = self.slowest(
            check(theirs, self.want, self.tp, self.rank)
        )

    def time_two_gpus(self, timer: GraphTimer) -> None:
        methods = {
            "ours_tp": lambda: self.runner(*self.shard_args),
            "torch_tp": lambda: settled(self.torch_shard(*self.torch_args)),
        }
        for key, call in methods.items():
            us, mode = timed(timer, call, self.args.reps)
            self.row[key], self.row[f"{key}_mode"] = self.slowest(us), mode

    def one_gpu(self, timer: GraphTimer | None) -> None:
        """Rank 0 only: the unsharded program, checked and timed (a DTensor
        configuration takes its plain configuration's)."""
        if self.plain is not None:
            one_gpu = ("floor_one_gpu", "ours_one_gpu", "torch_one_gpu")
            for key in (*one_gpu, "error_one_gpu", "kernels_one_gpu"):
                if key in self.plain.row:
                    self.row[key] = self.plain.row[key]
            return
        module = parse(make_context(), self.one_text, "<one gpu>")
        params = [p.to(self.device) for p in self.tp.reference.parameters]
        args = [*self.xs, *params]
        row = self.row
        row["floor_one_gpu"] = nbytes(args) / self.args.bandwidth * 1e6
        if timer is None:  # the dry run: the interpreter
            arrays = [a.float().numpy() for a in args]
            outs = run(module, arrays)
            ours = [
                torch.from_numpy(np.require(y, np.float32, ["C", "W"])) for y in outs
            ]
        else:
            import mirage_xdsl

            one = mirage_xdsl.compile(module, backend=self.args.backend)
            ours = flat(one(*args))
            row["ours_one_gpu"] = timer.per_call_us([lambda: one(*args)], BATCH)
            row["torch_one_gpu"] = timer.per_call_us(
                [lambda: self.module(*self.xs)], BATCH
            )
        row["error_one_gpu"] = max(
            rel_error(a, b) for a, b in zip(ours, self.want, strict=True)
        )


def run_config(config: Config, rank: int, timer) -> dict:
    config.prepare()
    config.check_two_gpus()
    if timer is not None:
        config.time_two_gpus(timer)
    if rank == 0:
        config.one_gpu(timer)
    row = config.row
    errors = ("error_tp", "error_torch_tp", "error_one_gpu")
    row["correct"] = all(row.get(k, 0.0) <= TOLERANCE for k in errors)
    dist.barrier()
    return row


def configs(name: str, batch: int, args, rank: int):
    """The block split from the unsharded module, then (--dtensor) from the
    DTensor module, each a :class:`Config` made when its turn comes."""
    plain = Config(name, batch, args, rank)
    yield plain
    if args.dtensor:
        yield Config(name, batch, args, rank, plain)


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
    parser.add_argument(
        "--segment-ops",
        type=int,
        default=0,
        help="the search's segment-ops option for every program (0: its default)",
    )
    parser.add_argument("--backend", default="auto", choices=["auto", "triton", "cuda"])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument(
        "--shards", type=int, default=2, help="GPUs, when not under torchrun"
    )
    parser.add_argument(
        "--dtensor",
        action="store_true",
        help="also take each block through parallelize_module and from_dtensor",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: small shapes, gloo, the interpreter, nothing timed",
    )
    args = parser.parse_args(argv)
    backend = "gloo" if args.dry_run else "nccl"
    if "RANK" not in os.environ:
        spawn(_worker, args.shards, args, backend=backend)
        return 0
    join_group(backend)
    _worker(dist.get_rank(), args)
    dist.destroy_process_group()
    return 0


def _worker(rank: int, args) -> None:
    timer = None if args.dry_run else GraphTimer(reps=args.reps)
    if timer is None:
        device = "CPU (dry run)"
        args.bandwidth = DRY_RUN_BANDWIDTH
    else:
        args.bandwidth = copy_bandwidth(timer)
        device = (
            f"{torch.cuda.get_device_name()}; "
            f"copy bandwidth {args.bandwidth / 1e12:.2f} TB/s"
        )
    rows = []
    start = time.monotonic()
    for name in args.blocks:
        for batch in args.batches:
            for config in configs(name, batch, args, rank):
                rows.append(run_config(config, rank, timer))
                if rank == 0:
                    label = f"{name} b{batch} from {config.row['from']}"
                    print(f"{label}: {json.dumps(rows[-1])}", flush=True)
                    write(rows, device, args.out, time.monotonic() - start)
    if rank == 0:
        print(markdown(rows, device))


if __name__ == "__main__":
    sys.exit(main())
