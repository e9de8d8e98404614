"""Tensor-parallel programs on several GPUs: one process per GPU, NCCL between.

Each process runs one shard of a
:class:`~mirage_xdsl.semantics.sharding.ShardedProgram`. :class:`ShardRunner`
cuts the shard's program at its collectives (``ir/collectives.py``), compiles
each stage with :func:`mirage_xdsl.compile` (on CUDA tensors) or runs it in
the interpreter (on CPU tensors), and runs every ``kernel.all_reduce`` as
``torch.distributed.all_reduce`` on the stage's output: NCCL between GPUs,
gloo between CPU processes. A sum is started as soon as the ops it needs are
done and waited for by the first stage that reads it, so the work that does
not need it (the attention block's key and value projections) runs while
NCCL sums. Kernels run on torch's current stream and the collectives are
ordered against it, so a whole step can be captured in one CUDA graph (NCCL
collectives can be captured).

Processes are started by ``torchrun`` (:func:`join_group` reads its
environment) or by :func:`spawn`, which starts one per shard on this machine.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from xdsl.ir import OpResult

from mirage_xdsl.dialects import kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.collectives import Stage
from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.semantics.interpreter import run
from mirage_xdsl.semantics.sharding import ShardedProgram


class ShardRunner:
    """This process's shard of ``program``: its stages, with the sum over the
    shards' processes (``group``, default the whole world) between them."""

    def __init__(
        self,
        program: ShardedProgram,
        *,
        group: Any = None,
        backend: str = "auto",
        device: int | None = None,
    ):
        self.program = program
        self.staged = program.staged()
        self.group = group
        self.backend = backend
        self.device = device
        self._compiled: list[Any] | None = None

    def check_group(self) -> None:
        size = dist.get_world_size(self.group) if dist.is_initialized() else 1
        if size != self.program.shards:
            raise MirageError(
                f"error: the program has {self.program.shards} shards but the "
                f"process group has {size} processes"
            )

    def compile(self) -> None:
        """Compile every stage that has kernels (done at the first GPU call)."""
        from mirage_xdsl.runtime.api import compile

        device = self.device if self.device is not None else torch.cuda.current_device()
        self._compiled = [
            compile(s.module, backend=self.backend, device=device)
            if _has_ops(s)
            else None
            for s in self.staged.stages
        ]

    def __call__(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        """This shard's outputs for its ``inputs`` (its pieces, as
        ``TensorParallel.shard_inputs`` gives them). Each all-reduce starts
        as soon as its stage is done; the stages that do not read its sum
        run while it is in flight."""
        self.check_group()
        env: dict[Any, torch.Tensor] = dict(
            zip(self.staged.arguments, inputs, strict=True)
        )
        pending: dict[Any, Any] = {}
        for i, stage in enumerate(self.staged.stages):
            for value in [*stage.inputs, *(v.input for v in stage.views)]:
                if value in pending:
                    pending.pop(value).wait()
            for view in stage.views:
                env[view.result] = env[view.input].reshape(t.tensor_shape(view.result))
            outs = self._run_stage(i, stage, [env[v] for v in stage.inputs])
            env.update(zip(stage.outputs, outs, strict=True))
            for op in stage.reduces:
                env[op.result], pending[op.result] = self._all_reduce(op, env[op.input])
        for work in pending.values():
            work.wait()
        results = [env[v] for v in self.staged.results]
        if not inputs[0].is_cuda:
            results = [y.to(inputs[0].dtype) for y in results]
        return results

    def _run_stage(
        self, index: int, stage: Stage, args: list[torch.Tensor]
    ) -> list[torch.Tensor]:
        if not _has_ops(stage):
            return []
        if args[0].is_cuda:
            if self._compiled is None:
                self.compile()
            assert self._compiled is not None
            return list(self._compiled[index].run(*args))
        arrays = [x.detach().float().numpy() for x in args]
        return [
            torch.from_numpy(np.require(y, np.float32, ["C", "W"]))
            for y in run(stage.module, arrays)
        ]

    def _all_reduce(
        self, op: kernel.AllReduceOp, x: torch.Tensor
    ) -> tuple[torch.Tensor, Any]:
        """The sum over the group, started (in place when nothing else reads
        ``x``): the tensor it will hold, and the work to wait for."""
        alone = isinstance(op.input, OpResult) and op.input.has_one_use()
        out = x if alone and x.is_contiguous() else x.contiguous().clone()
        return out, dist.all_reduce(out, group=self.group, async_op=True)


def _has_ops(stage: Stage) -> bool:
    fn = stage.module.body.block.first_op
    return fn is not None and len(fn.body.block.ops) > 1  # type: ignore[attr-defined]


def join_group(backend: str | None = None) -> tuple[int, int]:
    """Join the process group ``torchrun`` (or :func:`spawn`) describes in the
    environment; each process takes the GPU of its local rank. Returns
    ``(rank, world_size)``."""
    missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR") if v not in os.environ]
    if missing:
        raise MirageError(
            f"error: {', '.join(missing)} not set: start the processes with "
            "torchrun or mirage_xdsl.runtime.distributed.spawn"
        )
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", os.environ["RANK"])))
    if not dist.is_initialized():
        dist.init_process_group(backend)
    return dist.get_rank(), dist.get_world_size()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(
    rank: int,
    fn: Callable[..., Any],
    world: int,
    port: int,
    backend: str | None,
    args: Sequence[Any],
) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
    )
    join_group(backend)
    try:
        fn(rank, *args)
    finally:
        dist.destroy_process_group()


def spawn(
    fn: Callable[..., Any], shards: int, *args: Any, backend: str | None = None
) -> None:
    """Run ``fn(rank, *args)`` in ``shards`` new processes on this machine,
    each in the process group (NCCL on GPUs, else gloo); an exception in any
    is raised here. ``fn`` must be importable (defined at a module's top level)."""
    import torch.multiprocessing as mp

    mp.spawn(
        _entry, args=(fn, shards, _free_port(), backend, args), nprocs=shards, join=True
    )
