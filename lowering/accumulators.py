"""The three steps of a ``block.forloop_accum``: zero, accumulate, finish.

An accumulator is an fp32 tile in shared memory that lives across the whole
for-loop (see ``shared_plan.py``). The kernel zeroes it before the loop, adds
each iteration's value at the end of the iteration — element by element for
``"none"``, row sums (of squares) reduced across a warp for ``"sum"``,
``"mean"`` and ``"rms"`` — and after the loop divides by the number of summed
elements (``mean``) and takes the square root (``rms``). The kernel
(``kernel_lowering.py``) decides when each step runs and puts the barriers
between them.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from mirage_xdsl.dialects import block
from mirage_xdsl.lowering.gpu_builder import Ix
from mirage_xdsl.lowering.tiles import (
    TileEnv,
    dims,
    first_lane,
    for_each_element,
    load,
    reduce_rows,
    store,
)


def zero(env: TileEnv, acc: block.ForloopAccumOp) -> None:
    b = env.b
    dst = env.tile(acc.result)
    for_each_element(b, env.threads, dst.shape, lambda i: store(b, b.f32(0.0), dst, i))


def accumulate(env: TileEnv, acc: block.ForloopAccumOp) -> None:
    """Add this iteration's value of ``acc.input`` into the accumulator.

    A product fused into the accumulator (``schedule.fused_accumulations``) is
    added by its matmul instead; the kernel does not call this for it.
    """
    b = env.b
    dst = env.tile(acc.result)
    src = env.tile(acc.input)
    if acc.reduction == "none":

        def element(index: list[Ix]) -> None:
            total = b.addf(load(b, dst, index), load(b, src, index))
            store(b, total, dst, index)

        for_each_element(b, env.threads, dst.shape, element)
        return

    def finish(index: list[Ix], total: SSAValue, lane: SSAValue | None) -> None:
        with b.when(first_lane(b, lane)):
            store(b, b.addf(load(b, dst, index), total), dst, index)

    reduce_rows(
        b,
        env.threads,
        src,
        len(src.shape) - 1,
        finish,
        square=acc.reduction == "rms",
    )


def finalize(env: TileEnv, acc: block.ForloopAccumOp, iterations: int) -> None:
    """Turn a sum over ``iterations`` for-loop iterations into a mean or an RMS."""
    if acc.reduction not in ("mean", "rms"):
        return
    b = env.b
    dst = env.tile(acc.result)
    count = float(dims(acc.input.type)[-1] * iterations)

    def element(index: list[Ix]) -> None:
        mean = b.divf(load(b, dst, index), b.f32(count))
        store(b, b.sqrt(mean) if acc.reduction == "rms" else mean, dst, index)

    for_each_element(b, env.threads, dst.shape, element)
