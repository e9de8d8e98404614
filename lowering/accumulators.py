"""The three steps of a ``block.forloop_accum``: zero, accumulate, finish.

An accumulator is an fp32 tile in shared memory that lives across the whole
for-loop (see ``shared_plan.py``). The kernel zeroes it before the loop, adds
each iteration's value at the end of the iteration — element by element for
``"none"``, row sums (of squares) reduced across a warp for ``"sum"``,
``"mean"`` and ``"rms"`` — and after the loop divides by the number of summed
elements (``mean``) and takes the square root (``rms``). The kernel
(``kernel_lowering.py``) decides when each step runs and puts the barriers
between them.

A shifted accumulator (the online softmax) keeps its shift's running maximum
in one more column of its tile, past the last real one. Each iteration
rescales the sum so far by ``exp(old - new)`` and adds the new term times
``exp(shift - new)``, ``new`` being the maximum with this iteration's shift;
then, after a barrier (every thread has read the old maximum), the column
takes the new maximum.
"""

from __future__ import annotations

from xdsl.dialects import gpu
from xdsl.ir import SSAValue

from mirage_xdsl.dialects import block
from mirage_xdsl.lowering.gpu_builder import Ix
from mirage_xdsl.lowering.tiles import (
    TileEnv,
    TileRef,
    dims,
    first_lane,
    for_each_element,
    load,
    reduce_rows,
    store,
)

LOWEST = -3.4028234663852886e38
"""The lowest finite fp32: the running maximum before the first iteration
(``exp(LOWEST - m)`` is 0 for any shift ``m`` a kernel meets)."""


def zero(env: TileEnv, acc: block.ForloopAccumOp) -> None:
    b = env.b
    dst = env.tile(acc.result)
    for_each_element(b, env.threads, dst.shape, lambda i: store(b, b.f32(0.0), dst, i))
    if acc.shifted:
        for_each_element(
            b,
            env.threads,
            _rows(dst),
            lambda i: _store_running_max(env, dst, i, b.f32(LOWEST)),
        )


def _rows(dst: TileRef) -> tuple[int, ...]:
    return (*dst.shape[:-1], 1)


def _running_max_at(dst: TileRef, index: list[Ix]) -> list[Ix]:
    """Where the running maximum of ``index``'s row sits: the extra column."""
    return dst.at([*index[:-1], dst.shape[-1]])


def _load_running_max(env: TileEnv, dst: TileRef, index: list[Ix]) -> SSAValue:
    return env.b.load_f32(dst.mem, _running_max_at(dst, index))


def _store_running_max(
    env: TileEnv, dst: TileRef, index: list[Ix], value: SSAValue
) -> None:
    env.b.store_f32(value, dst.mem, _running_max_at(dst, index))


def _rescaled(
    env: TileEnv, acc: block.ForloopAccumOp, index: list[Ix], term: SSAValue
) -> SSAValue:
    """``sum * exp(old - new) + term * exp(shift - new)`` at ``index``."""
    assert acc.shift is not None
    b = env.b
    dst = env.tile(acc.result)
    old = _load_running_max(env, dst, index)
    shift = load(b, env.tile(acc.shift), index)
    new = b.maxf(old, shift)
    kept = b.mulf(load(b, dst, index), b.exp(b.addf(old, b.negf(new))))
    return b.addf(kept, b.mulf(term, b.exp(b.addf(shift, b.negf(new)))))


def _advance_running_max(env: TileEnv, acc: block.ForloopAccumOp) -> None:
    """After every rescaling has read the old maximum, take the new one."""
    assert acc.shift is not None
    b = env.b
    dst = env.tile(acc.result)
    b.insert(gpu.BarrierOp())
    shift = env.tile(acc.shift)

    def row(index: list[Ix]) -> None:
        new = b.maxf(_load_running_max(env, dst, index), load(b, shift, index))
        _store_running_max(env, dst, index, new)

    for_each_element(b, env.threads, _rows(dst), row)


def accumulate(env: TileEnv, acc: block.ForloopAccumOp) -> None:
    """Add this iteration's value of ``acc.input`` into the accumulator.

    A product fused into the accumulator (``schedule.fused_accumulations``) is
    added by its matmul instead; the kernel does not call this for it.
    """
    b = env.b
    dst = env.tile(acc.result)
    src = env.tile(acc.input)

    def added(index: list[Ix], term: SSAValue) -> SSAValue:
        if acc.shifted:
            return _rescaled(env, acc, index, term)
        return b.addf(load(b, dst, index), term)

    if acc.reduction == "none":

        def element(index: list[Ix]) -> None:
            store(b, added(index, load(b, src, index)), dst, index)

        for_each_element(b, env.threads, dst.shape, element)
        if acc.shifted:
            _advance_running_max(env, acc)
        return

    def finish(index: list[Ix], total: SSAValue, lane: SSAValue | None) -> None:
        with b.when(first_lane(b, lane)):
            store(b, added(index, total), dst, index)

    reduce_rows(
        b,
        env.threads,
        src,
        len(src.shape) - 1,
        finish,
        square=acc.reduction == "rms",
    )
    if acc.shifted:
        _advance_running_max(env, acc)


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
