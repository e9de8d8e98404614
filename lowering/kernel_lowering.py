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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import Phase, phases_of
from mirage_xdsl.dialects.gpux import (
    CopyOp,
    CpAsyncCommitOp,
    CpAsyncOp,
    CpAsyncWaitOp,
    SharedAllocOp,
)
from mirage_xdsl.lowering.block_ops import LOWERINGS, kind_of
from mirage_xdsl.lowering.gpu_builder import GpuBuilder, Ix
from mirage_xdsl.lowering.matmul import (
    Epilogue,
    accumulate_result,
    lower_matmul,
    shapes_allow_tensor_cores,
)
from mirage_xdsl.lowering.shared_plan import (
    ACCUMULATOR_TYPE,
    Interval,
    TileLayout,
    assign_offsets,
    layout_for,
)
from mirage_xdsl.lowering.tiles import (
    SCALAR,
    WARP,
    Threads,
    TileRef,
    first_lane,
    for_each_element,
    load,
    numel,
    reduce_rows,
    store,
)
from xdsl.dialects import gpu
from xdsl.dialects.builtin import MemRefType, TensorType
from xdsl.ir import Operation, SSAValue

SHARED_LIMIT = 227 * 1024
MAX_STAGES = 3


def vector_width(tile_last: int, tensor_last: int, element_bytes: int) -> int:
    """Elements per copy: as fit 16 bytes and divide both rows."""
    width = 16 // element_bytes
    while width > 1 and (tile_last % width or tensor_last % width):
        width //= 2
    return width


def _dims(ty) -> tuple[int, ...]:
    return tuple(ty.get_shape())


def apply_after(kind: str) -> Epilogue:
    """Epilogue applying an element-wise op to each product element."""

    def epilogue(b: GpuBuilder, value: SSAValue, dst: TileRef, index: list[Ix]) -> None:
        store(b, SCALAR[kind](b, value), dst, index)

    return epilogue


@dataclass(frozen=True)
class Schedule:
    """A block graph's ops grouped in the order the kernel runs them.

    The kernel body is emitted in this order and shared memory is planned on
    it, so a tile's live range covers everything that happens to it: every
    loop-invariant input is copied in before any invariant op runs (one
    ``cp.async`` group), the accumulators are updated at the end of each
    iteration, and output tiles are stored after all the ops after the loop.
    Planning on program order instead lets a tile share bytes with an input
    that is still to be read, or with an output still to be stored.
    """

    loads: list[block.InputOp]
    """Loop-invariant inputs, copied into shared memory first."""
    before: list[Operation]
    """Loop-invariant ops, run once before the loop."""
    staged: list[block.InputOp]
    """Per-iteration inputs, prefetched into rings of stages."""
    loop: list[Operation]
    """Ops run on every iteration."""
    accs: list[block.ForloopAccumOp]
    """Accumulators: zeroed before the loop, updated at the end of each iteration."""
    after: list[Operation]
    """Ops run once after the loop."""
    outputs: list[block.OutputOp]
    """Tiles stored to device memory at the end."""

    def order(self) -> list[Operation | str]:
        """Every op in running order; ``"init"`` marks zeroing the accumulators."""
        return [
            *self.loads,
            *self.before,
            "init",
            *self.staged,
            *self.loop,
            *self.accs,
            *self.after,
            *self.outputs,
        ]

    @property
    def init(self) -> int:
        """Position of ``"init"`` in :meth:`order`."""
        return len(self.loads) + len(self.before)

    @property
    def loop_end(self) -> int:
        """Position of the last step of an iteration in :meth:`order`."""
        return self.init + len(self.staged) + len(self.loop) + len(self.accs)


def schedule_of(
    ops: Sequence[Operation], phase: Callable[[Operation], Phase]
) -> Schedule:
    """Group a block graph's ops (in program order) by when the kernel runs them."""

    def pick(p: Phase, cls: type | None = None, skip: tuple[type, ...] = ()) -> list:
        return [
            o
            for o in ops
            if phase(o) == p
            and (cls is None or isinstance(o, cls))
            and not isinstance(o, skip)
        ]

    return Schedule(
        loads=pick(Phase.INVARIANT, block.InputOp),
        before=pick(Phase.INVARIANT, skip=(block.InputOp,)),
        staged=pick(Phase.LOOP, block.InputOp),
        loop=pick(Phase.LOOP, skip=(block.InputOp,)),
        accs=pick(Phase.POST, block.ForloopAccumOp),
        after=pick(Phase.POST, skip=(block.ForloopAccumOp, block.OutputOp)),
        outputs=pick(Phase.POST, block.OutputOp),
    )


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
        self.fused = {
            o: o.results[0].get_user_of_unique_use()
            for o in self.schedule.loop
            if isinstance(o, block.MatmulOp)
            and self.forloop > 1
            and o.results[0].has_one_use()
            and isinstance(o.results[0].get_user_of_unique_use(), block.ForloopAccumOp)
            and o.results[0].get_user_of_unique_use().reduction == "none"  # type: ignore[union-attr]
        }
        self.epilogues = {
            o: user
            for o in ops
            if isinstance(o, block.MatmulOp)
            and o not in self.fused
            and o.results[0].has_one_use()
            and isinstance(user := o.results[0].get_user_of_unique_use(), t.UnaryOp)
            and user.KIND in SCALAR
            and self._phase(user) == self._phase(o)
        }
        self.tiles: dict[SSAValue, TileRef] = {}
        self.staged_tiles: set[SSAValue] = set()
        self.stage: Ix = 0

    def _phase(self, o: Operation) -> Phase:
        if isinstance(o, block.OutputOp):
            return Phase.POST
        if isinstance(o, block.InputOp):
            return Phase.LOOP if o.forloop_dim != -1 else Phase.INVARIANT
        return self.phases[o.results[0]]

    # --- shared memory plan ------------------------------------------------

    def staged(self, o: Operation) -> bool:
        return isinstance(o, block.InputOp) and o.forloop_dim != -1

    def storage(self) -> dict[SSAValue, tuple[TileLayout, bool]]:
        """Layout of every value kept in shared memory (stages filled in later)."""
        ldmatrix: set[SSAValue] = set()
        for o in self.op.entry.ops:
            if isinstance(o, block.MatmulOp):
                k, n = _dims(o.lhs.type)[-1], _dims(o.rhs.type)[-1]
                if shapes_allow_tensor_cores(k, n):
                    ldmatrix.update((o.lhs, o.rhs))
        out: dict[SSAValue, tuple[TileLayout, bool]] = {}
        for o in self.op.entry.ops:
            if isinstance(o, block.OutputOp) or o in self.fused or o in self.epilogues:
                continue
            for r in o.results:
                ty = r.type
                assert isinstance(ty, TensorType)
                post = self.phases[r] == Phase.POST
                dtype = ACCUMULATOR_TYPE if post else ty.element_type
                out[r] = (layout_for(_dims(ty), dtype, r in ldmatrix), self.staged(o))
        return out

    def plan(self) -> int:
        """Allocate the tiles; returns the dynamic shared memory in bytes."""
        pos = {o: i for i, o in enumerate(self.schedule.order())}
        init, loop_end = self.schedule.init, self.schedule.loop_end
        storage = self.storage()
        live: dict[SSAValue, Interval] = {}
        for v in storage:
            owner = v.owner
            assert isinstance(owner, Operation)
            start = pos[owner]
            producers = [m for m, user in self.epilogues.items() if user is owner]
            if producers:  # written by the matmul's epilogue
                start = pos[producers[0]]
            uses = [pos[u.operation] for u in v.uses if u.operation in pos]
            end = max(uses, default=start)
            if owner in self.schedule.loads:
                # All copied by one cp.async group, which lands only at the
                # wait before the first op that may read them.
                start, end = 0, max(end, len(self.schedule.loads))
            if isinstance(owner, block.ForloopAccumOp) or self.staged(owner):
                start, end = init, max(end, loop_end)
            elif start < init and end > init:
                end = max(end, loop_end)
            live[v] = Interval(start, end)
        stages = min(MAX_STAGES, self.forloop)
        while True:
            layouts = {
                v: TileLayout(lay.shape, lay.dtype, lay.pad, stages if staged else 0)
                for v, (lay, staged) in storage.items()
            }
            offsets, total = assign_offsets(
                {v: lay.nbytes for v, lay in layouts.items()}, live
            )
            if total <= SHARED_LIMIT or stages == 1:
                break
            stages -= 1
        self.stages = stages
        for v, lay in layouts.items():
            mem = self.b.value(SharedAllocOp(offsets[v], lay.memref_type()))
            self.tiles[v] = TileRef(mem, lay.shape)
            if lay.stages:
                self.staged_tiles.add(v)
        return total

    def tile(self, v: SSAValue) -> TileRef:
        """The shared tile holding ``v`` (this iteration's stage if staged)."""
        ref = self.tiles[v]
        if v in self.staged_tiles:
            return TileRef(ref.mem, ref.shape, (self.stage,))
        return ref

    # --- device memory ---------------------------------------------------

    def tile_origin(self, o: block.InputOp, iteration: Ix) -> list[Ix]:
        """Index of the tile's first element in the device tensor."""
        b = self.b
        full = _dims(o.source.type)
        tile = _dims(o.result.type)
        origin: list[Ix] = [0] * len(full)
        for g, d in enumerate(o.input_map):
            if d != -1:
                per_block = full[d] // self.op.grid_dims[g]
                origin[d] = b.add(origin[d], b.mul(self.block_ids[g], per_block))
        if o.forloop_dim != -1:
            d = o.forloop_dim
            origin[d] = b.add(origin[d], b.mul(iteration, tile[d]))
        return origin

    def load_input(self, o: block.InputOp, iteration: Ix, stage: Ix) -> None:
        """Issue the cp.async copies of one input tile (or plain copies)."""
        b = self.b
        src = self.args[o.source]
        assert isinstance(src.type, MemRefType)
        full = _dims(src.type)
        tile = _dims(o.result.type)
        ref = self.tiles[o.result]
        dst = TileRef(ref.mem, tile, (stage,) if self.staged(o) else ())
        elem = src.type.element_type.bitwidth // 8  # type: ignore[attr-defined]
        width = vector_width(tile[-1], full[-1], elem)
        origin = self.tile_origin(o, iteration)
        chunks = (*tile[:-1], tile[-1] // width)

        def copy(flat: Ix) -> None:
            index = b.unravel(flat, chunks)
            index[-1] = b.mul(index[-1], width)
            at = [b.add(i, x) for i, x in zip(origin, index, strict=True)]
            if width * elem >= 4:
                b.insert(
                    CpAsyncOp(
                        dst.mem,
                        [b.index(i) for i in dst.at(index)],
                        src,
                        [b.index(i) for i in at],
                        width * elem,
                    )
                )
            else:
                b.store(b.load(src, at), dst.mem, dst.at(index))

        b.strided(self.threads.tid, numel(chunks), self.threads.count, copy)

    def store_output(self, o: block.OutputOp, result: SSAValue) -> None:
        b = self.b
        src = self.tile(o.input)
        assert isinstance(result.type, MemRefType)
        full = _dims(result.type)
        tile = src.shape
        width = vector_width(tile[-1], full[-1], 2)
        if src.dtype != result.type.element_type:
            width = min(width, 8)
        origin: list[Ix] = [0] * len(full)
        for g, d in enumerate(o.output_map):
            if d != -1:
                origin[d] = b.add(origin[d], b.mul(self.block_ids[g], tile[d]))
        chunks = (*tile[:-1], tile[-1] // width)

        def copy(flat: Ix) -> None:
            index = b.unravel(flat, chunks)
            index[-1] = b.mul(index[-1], width)
            at = [b.add(i, x) for i, x in zip(origin, index, strict=True)]
            b.insert(
                CopyOp(
                    result,
                    [b.index(i) for i in at],
                    src.mem,
                    [b.index(i) for i in src.at(index)],
                    width,
                )
            )

        b.strided(self.threads.tid, numel(chunks), self.threads.count, copy)

    # --- accumulators ----------------------------------------------------

    def zero(self, acc: block.ForloopAccumOp) -> None:
        b = self.b
        dst = self.tile(acc.result)
        for_each_element(
            b, self.threads, dst.shape, lambda i: store(b, b.f32(0.0), dst, i)
        )

    def accumulate(self, acc: block.ForloopAccumOp) -> None:
        b = self.b
        dst = self.tile(acc.result)
        if acc.input.owner in self.fused:
            return
        src = self.tile(acc.input)
        if acc.reduction == "none":

            def element(index: list[Ix]) -> None:
                total = b.addf(load(b, dst, index), load(b, src, index))
                store(b, total, dst, index)

            for_each_element(b, self.threads, dst.shape, element)
            return

        def finish(index: list[Ix], total: SSAValue, lane: SSAValue | None) -> None:
            with b.when(first_lane(b, lane)):
                store(b, b.addf(load(b, dst, index), total), dst, index)

        reduce_rows(
            b,
            self.threads,
            src,
            len(src.shape) - 1,
            finish,
            square=acc.reduction == "rms",
        )

    def finalize(self, acc: block.ForloopAccumOp) -> None:
        if acc.reduction not in ("mean", "rms"):
            return
        b = self.b
        dst = self.tile(acc.result)
        count = float(_dims(acc.input.type)[-1] * self.forloop)

        def element(index: list[Ix]) -> None:
            mean = b.divf(load(b, dst, index), b.f32(count))
            store(b, b.sqrt(mean) if acc.reduction == "rms" else mean, dst, index)

        for_each_element(b, self.threads, dst.shape, element)

    # --- the kernel ------------------------------------------------------

    def compute(self, o: Operation) -> None:
        if isinstance(o, block.ForloopAccumOp):
            self.accumulate(o)
        elif o in self.fused or o in self.epilogues:
            assert isinstance(o, block.MatmulOp)
            if o in self.fused:
                dst, epilogue = self.tile(self.fused[o].results[0]), accumulate_result
            else:
                user = self.epilogues[o]
                dst, epilogue = self.tile(user.results[0]), apply_after(user.KIND)
            lower_matmul(
                self.b, self.threads, self.tile(o.lhs), self.tile(o.rhs), dst, epilogue
            )
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
        dims = (gpu.DimensionEnum.X, gpu.DimensionEnum.Y, gpu.DimensionEnum.Z)
        self.block_ids: list[Ix] = [
            b.value(gpu.BlockIdOp(gpu.DimensionAttr(d))) if g > 1 else 0
            for d, g in zip(dims, self.op.grid_dims, strict=True)
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
            self.zero(acc)
        if sched.accs:
            b.insert(gpu.BarrierOp())
        self.emit_loop()
        for acc in sched.accs:
            self.finalize(acc)
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
