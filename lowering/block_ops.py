"""How each block-level op becomes GPU code over shared-memory tiles.

``LOWERINGS`` maps an op's ``KIND`` to a function that emits the op for one
thread block: it reads its operand tiles and writes its result tile through a
:class:`TileEnv`. Element-wise ops and thread graphs are block-stride loops
computing in fp32 registers; ``reduce_sum`` and ``rms_norm`` reduce rows with
warp shuffles; ``matmul`` uses tensor cores (see ``matmul.py``); ``concat``
copies its operands side by side. Accumulation across the for-loop lives in
``accumulators.py``; loads and stores of device tensors in ``lower_to_gpu.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from mirage_xdsl.dialects import block
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.lowering.gpu_builder import GpuBuilder, Ix
from mirage_xdsl.lowering.matmul import lower_matmul
from mirage_xdsl.lowering.tiles import (
    SCALAR,
    WARP,
    Threads,
    TileRef,
    first_lane,
    for_each_element,
    load,
    reduce_rows,
    store,
)
from xdsl.ir import Operation, SSAValue


class TileEnv(Protocol):
    b: GpuBuilder
    threads: Threads

    def tile(self, value: SSAValue) -> TileRef: ...


def elementwise(env: TileEnv, op: t.TensorOp) -> None:
    b = env.b
    ins = [env.tile(v) for v in op.operands]
    dst = env.tile(op.results[0])

    def element(index: list[Ix]) -> None:
        args = [load(b, tile, index) for tile in ins]
        store(b, SCALAR[op.KIND](b, *args), dst, index)

    for_each_element(b, env.threads, dst.shape, element)


def thread_graph(env: TileEnv, op: block.ThreadGraphOp) -> None:
    """The fused chain, evaluated in registers once per output element."""
    b = env.b
    ins = [env.tile(v) for v in op.inputs]
    outs = [env.tile(v) for v in op.outputs]

    def element(index: list[Ix]) -> None:
        values: dict[SSAValue, SSAValue] = {
            arg: load(b, tile, index)
            for arg, tile in zip(op.entry.args, ins, strict=True)
        }
        for inner in op.entry.ops:
            if isinstance(inner, t.TensorOp):
                args = [values[v] for v in inner.operands]
                values[inner.results[0]] = SCALAR[inner.KIND](b, *args)
            else:  # thread.yield
                for v, tile in zip(inner.operands, outs, strict=True):
                    store(b, values[v], tile, index)

    for_each_element(b, env.threads, outs[0].shape, element)


def reduce_sum(env: TileEnv, op: block.ReduceSumOp) -> None:
    b = env.b
    dst = env.tile(op.result)

    def finish(index: list[Ix], total: SSAValue, lane: SSAValue | None) -> None:
        with b.when(first_lane(b, lane)):
            store(b, total, dst, index)

    reduce_rows(b, env.threads, env.tile(op.input), op.dim.value.data, finish)


def rms_norm(env: TileEnv, op: block.RmsNormOp) -> None:
    b = env.b
    src, dst = env.tile(op.input), env.tile(op.result)
    dim = len(src.shape) - 1
    length = src.shape[dim]

    def finish(index: list[Ix], total: SSAValue, lane: SSAValue | None) -> None:
        scale = b.divf(b.f32(1.0), b.sqrt(b.divf(total, b.f32(float(length)))))

        def write(j: SSAValue, _) -> tuple[()]:
            at = [*index[:-1], j]
            store(b, b.mulf(load(b, src, at), scale), dst, at)
            return ()

        if lane is None:
            b.loop(0, length, 1, write)
        else:
            b.loop(lane, length, WARP, write)

    reduce_rows(b, env.threads, src, dim, finish, square=True)


def concat(env: TileEnv, op: block.ConcatOp) -> None:
    b = env.b
    dst = env.tile(op.result)
    dim = op.dim.value.data
    offset = 0
    for v in (op.lhs, op.rhs):
        src = env.tile(v)
        shape = list(dst.shape)
        shape[dim] = src.shape[dim]
        skip = offset

        def element(index: list[Ix], src: TileRef = src, skip: int = skip) -> None:
            at = list(index)
            at[dim] = b.add(at[dim], skip)
            store(b, load(b, src, index), dst, at)

        for_each_element(b, env.threads, shape, element)
        offset += src.shape[dim]


def matmul(env: TileEnv, op: block.MatmulOp) -> None:
    lower_matmul(
        env.b, env.threads, env.tile(op.lhs), env.tile(op.rhs), env.tile(op.result)
    )


LOWERINGS: dict[str, Callable[..., None]] = {
    **{
        kind: elementwise for kind in (*t.BINARY_KINDS, "exp", "silu", "sqrt", "square")
    },
    "rms_norm": rms_norm,
    "reduce_sum": reduce_sum,
    "concat": concat,
    "matmul": matmul,
    "thread_graph": thread_graph,
}
"""Lowering of each compute op of a block graph, by ``KIND``."""


def kind_of(op: Operation) -> str:
    return "thread_graph" if isinstance(op, block.ThreadGraphOp) else op.KIND  # type: ignore[attr-defined]
