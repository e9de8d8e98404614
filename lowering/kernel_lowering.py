"""One ``kernel.customized`` op → one ``gpu.func`` kernel.

The block graph runs in the phases of ``dialects/block_structure.py``, and the
kernel follows them:

1. loop-invariant inputs are copied into shared memory (``cp.async``), and
   the invariant ops run once;
2. accumulators (fp32 shared tiles) are zeroed;
3. the for-loop: per-iteration inputs are loaded ``stages - 1`` iterations
   ahead into a ring of shared buffers (``cp.async`` groups; the loop waits for
   the oldest group, so copies overlap the computation of earlier
   iterations), then the loop ops run and the accumulators are updated;
4. accumulators are finished (mean, RMS) and the ops after the loop run;
5. output tiles are written to device memory with 16-byte stores, placed by
   ``omap``.

A ``block.matmul`` whose only user is a plain ``block.forloop_accum`` adds its
product straight into the accumulator, and one whose only user is an
element-wise unary op applies it on the way out (``exp(Q·K)``); both skip the
intermediate tile. A
barrier follows every op, since each op is a collective over whole tiles.

This module puts the kernel together: thread and block ids, the order of the
phases, the pipelined for-loop and the barriers. What runs when, and which
matmuls fuse with their user, is decided in ``schedule.py``; where tiles sit
in shared memory in ``shared_plan.py``; the copies between device and shared
memory are in ``tile_copies.py``, the accumulator steps in ``accumulators.py``,
and the block ops themselves in ``block_ops.py`` and ``matmul.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import gpu
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.dialects.block_structure import Phase, phases_of
from mirage_xdsl.dialects.gpux import CpAsyncCommitOp, CpAsyncWaitOp, SharedAllocOp
from mirage_xdsl.lowering.accumulators import accumulate, finalize, zero
from mirage_xdsl.lowering.block_ops import LOWERINGS, kind_of
from mirage_xdsl.lowering.gpu_builder import GpuBuilder, Ix
from mirage_xdsl.lowering.matmul import accumulate_result, apply_after, block_matmul
from mirage_xdsl.lowering.schedule import (
    epilogue_users,
    fused_accumulations,
    is_staged,
    phase_of,
    schedule_of,
)
from mirage_xdsl.lowering.shared_plan import live_ranges, plan_shared, tile_storage
from mirage_xdsl.lowering.tile_copies import (
    copy_in,
    copy_in_transposed,
    copy_out,
    tile_origin,
)
from mirage_xdsl.lowering.tiles import WARP, Threads, TileRef, dims


class KernelLowering:
    """Builds the body of one kernel from a customized op's block graph."""

    def __init__(self, op: kernel.CustomizedOp, fn: gpu.FuncOp):
        self.op = op
        self.fn = fn
        self.b = GpuBuilder(fn.body.block)
        self.forloop = op.forloop
        self.phases = phases_of(op)
        self.args = dict(zip(op.entry.args, fn.body.block.args, strict=False))
        self.results = list(fn.body.block.args[len(op.inputs) :])
        ops = list(op.entry.ops)
        self.schedule = schedule_of(ops, self._phase)
        self.fused = fused_accumulations(self.schedule, self.forloop)
        self.epilogues = epilogue_users(ops, self.fused, self._phase)
        self.tiles: dict[SSAValue, TileRef] = {}
        self.staged_tiles: set[SSAValue] = set()
        self.stage: Ix = 0

    def _phase(self, o: Operation) -> Phase:
        return phase_of(self.phases, o)

    # --- shared memory -----------------------------------------------------

    def plan(self) -> int:
        """Allocate the tiles; returns the dynamic shared memory in bytes."""
        untiled = {*self.fused, *self.epilogues}
        storage = tile_storage(self.op.entry.ops, self.phases, untiled)
        live = live_ranges(storage, self.schedule, self.epilogues)
        plan = plan_shared(storage, live, self.forloop)
        self.stages = plan.stages
        for v, lay in plan.layouts.items():
            mem = self.b.value(SharedAllocOp(plan.offsets[v], lay.memref_type()))
            self.tiles[v] = TileRef(mem, dims(v.type))  # a running maximum lies beyond
            if lay.stages:
                self.staged_tiles.add(v)
        return plan.total

    def tile(self, v: SSAValue) -> TileRef:
        """The shared tile holding ``v`` (this iteration's stage if staged)."""
        ref = self.tiles[v]
        if v in self.staged_tiles:
            return TileRef(ref.mem, ref.shape, (self.stage,))
        return ref

    # --- device memory ---------------------------------------------------

    def load_input(self, o: block.InputOp, iteration: Ix, stage: Ix) -> None:
        """Issue the copies of one input tile into its (staged) shared tile."""
        ref = self.tiles[o.result]
        prefix = (stage,) if is_staged(o) else ()
        dst = TileRef(ref.mem, dims(o.result.type), prefix)
        origin = tile_origin(self.b, o, self.op.grid_dims, self.block_ids, iteration)
        if o.swapped_dims is not None:
            src = self.args[o.source]
            copy_in_transposed(self.b, self.threads, src, dst, origin, o.swapped_dims)
            return
        window = o.window_of
        rank = len(dims(o.source.type))
        row_start = window[1] if window is not None and window[0] == rank - 1 else 0
        copy_in(self.b, self.threads, self.args[o.source], dst, origin, row_start)

    def store_output(self, o: block.OutputOp, result: SSAValue) -> None:
        src = self.tile(o.input)
        copy_out(self.b, self.threads, o, src, result, self.block_ids)

    # --- the kernel ------------------------------------------------------

    def compute(self, o: Operation) -> None:
        if isinstance(o, block.ForloopAccumOp):
            if o.input.owner not in self.fused:  # else added by its matmul
                accumulate(self, o)
        elif o in self.fused or o in self.epilogues:
            assert isinstance(o, block.MatmulOp)
            if o in self.fused:
                dst, epilogue = self.tile(self.fused[o].results[0]), accumulate_result
            else:
                user = self.epilogues[o]
                dst, epilogue = self.tile(user.results[0]), apply_after(user.KIND)
            block_matmul(self, o, dst, epilogue)
        elif o in self.epilogues.values():
            return  # computed by its matmul's epilogue
        else:
            LOWERINGS[kind_of(o)](self, o)
        self.b.insert(gpu.BarrierOp())

    def emit(self) -> int:
        """Emit the kernel body; returns its dynamic shared memory in bytes."""
        b = self.b
        threads = self.op.block_dims
        tid: SSAValue = b.value(gpu.ThreadIdOp(gpu.DimensionAttr(gpu.DimensionEnum.X)))
        if threads[1] * threads[2] > 1:
            ty = b.value(gpu.ThreadIdOp(gpu.DimensionAttr(gpu.DimensionEnum.Y)))
            tz = b.value(gpu.ThreadIdOp(gpu.DimensionAttr(gpu.DimensionEnum.Z)))
            tid = b.index(
                b.add(tid, b.mul(b.add(ty, b.mul(tz, threads[1])), threads[0]))
            )
        count = threads[0] * threads[1] * threads[2]
        self.threads = Threads(
            tid, b.index(b.div(tid, WARP)), b.index(b.rem(tid, WARP)), count
        )
        axes = (gpu.DimensionEnum.X, gpu.DimensionEnum.Y, gpu.DimensionEnum.Z)
        self.block_ids: list[Ix] = [
            b.value(gpu.BlockIdOp(gpu.DimensionAttr(d))) if g > 1 else 0
            for d, g in zip(axes, self.op.grid_dims, strict=True)
        ]
        shared = self.plan()
        sched = self.schedule
        for o in sched.loads:
            self.load_input(o, 0, 0)
        b.insert(CpAsyncCommitOp())
        if sched.before or not sched.staged:
            b.insert(CpAsyncWaitOp(0))
            b.insert(gpu.BarrierOp())
        for o in sched.before:
            self.compute(o)
        for acc in sched.accs:
            zero(self, acc)
        if sched.accs:
            b.insert(gpu.BarrierOp())
        self.emit_loop()
        for acc in sched.accs:
            finalize(self, acc, self.forloop)
        if any(acc.reduction in ("mean", "rms") for acc in sched.accs):
            b.insert(gpu.BarrierOp())
        for o in sched.after:
            self.compute(o)
        for o, result in zip(sched.outputs, self.results, strict=True):
            self.store_output(o, result)
        b.insert(gpu.ReturnOp([]))
        return shared

    def emit_loop(self) -> None:
        b = self.b
        stages = self.stages
        staged = self.schedule.staged
        compute = [*self.schedule.loop, *self.schedule.accs]
        for s in range(stages - 1):
            if s < self.forloop:
                for o in staged:
                    self.load_input(o, s, s)
            b.insert(CpAsyncCommitOp())

        def body(it: Ix) -> None:
            ahead = b.add(it, stages - 1)
            guard = b.lt(ahead, self.forloop) if stages > 1 else None
            if staged:
                with b.when(guard):
                    for o in staged:
                        self.load_input(o, ahead, b.rem(ahead, stages))
                b.insert(CpAsyncCommitOp())
                b.insert(CpAsyncWaitOp(stages - 1))
                b.insert(gpu.BarrierOp())
            self.stage = b.rem(it, stages)
            for o in compute:
                self.compute(o)
            self.stage = 0

        if self.forloop == 1:
            body(0)
        elif compute:

            def run(it: SSAValue, _: Sequence[SSAValue]) -> tuple[()]:
                body(it)
                return ()

            b.loop(0, self.forloop, 1, run)
