"""How each block-level op becomes GPU code over shared-memory tiles.

``LOWERINGS`` maps an op's ``KIND`` to a function that emits the op for one
thread block: it reads its operand tiles and writes its result tile through a
:class:`TileEnv`. Element-wise ops and thread graphs are block-stride loops
computing in fp32 registers; ``reduce_sum``, ``reduce_max`` and ``rms_norm``
reduce rows with warp shuffles; ``matmul`` uses tensor cores (see ``matmul.py``); ``concat``
copies its operands side by side; ``transpose`` reads each element at the
swapped index. Accumulation across the for-loop lives in ``accumulators.py``;
loads and stores of device tensors in ``tile_copies.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import Block, Operation, SSAValue

from mirage_xdsl.dialects import block
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.lowering.gpu_builder import Ix
from mirage_xdsl.lowering.matmul import block_matmul
from mirage_xdsl.lowering.tiles import (
    WARP,
    TileEnv,
    TileRef,
    element_fn,
    first_lane,
    for_each_element,
    load,
    reduce_rows,
    store,
)
from mirage_xdsl.ops import elementwise_kinds


def elementwise(env: TileEnv, op: t.TensorOp) -> None:
    b = env.b
    ins = [env.tile(v) for v in op.operands]
    dst = env.tile(op.results[0])
    fn = element_fn(op)

    def element(index: list[Ix]) -> None:
        args = [load(b, tile, index) for tile in ins]
        store(b, fn(b, *args), dst, index)

    for_each_element(b, env.threads, dst.shape, element)


def ops_computing(body: Block, roots: Sequence[SSAValue]) -> list[t.TensorOp]:
    """The thread ops of ``body`` that ``roots`` depend on, in program order."""
    needed = set(roots)
    ops: list[t.TensorOp] = []
    for inner in reversed(list(body.ops)):
        if isinstance(inner, t.TensorOp) and inner.results[0] in needed:
            needed.update(inner.operands)
            ops.append(inner)
    return ops[::-1]


def thread_graph(env: TileEnv, op: block.ThreadGraphOp) -> None:
    """The fused chain, evaluated in registers once per output element.

    The results of one thread graph may differ in shape (a result computed only
    from a broadcast operand is smaller than the others), so each result shape
    gets its own block-stride loop, evaluating only the ops its results depend
    on: a single loop over one result's shape would write the smaller tiles
    past their end, or leave the larger ones short.
    """
    b = env.b
    ins = dict(zip(op.entry.args, (env.tile(v) for v in op.inputs), strict=True))
    yielded = list(op.entry.last_op.operands)  # type: ignore[union-attr]
    outs = list(zip(yielded, (env.tile(v) for v in op.outputs), strict=True))
    for shape in dict.fromkeys(tile.shape for _, tile in outs):
        group = [(v, tile) for v, tile in outs if tile.shape == shape]
        ops = ops_computing(op.entry, [v for v, _ in group])

        def element(
            index: list[Ix],
            group: list[tuple[SSAValue, TileRef]] = group,
            ops: list[t.TensorOp] = ops,
        ) -> None:
            values: dict[SSAValue, SSAValue] = {}

            def value(v: SSAValue) -> SSAValue:
                if v not in values:  # a region argument, read on first use
                    values[v] = load(b, ins[v], index)
                return values[v]

            for inner in ops:
                args = [value(v) for v in inner.operands]
                values[inner.results[0]] = element_fn(inner)(b, *args)
            for v, tile in group:
                store(b, value(v), tile, index)

        for_each_element(b, env.threads, shape, element)


def reduce_sum(env: TileEnv, op: block.ReduceSumOp) -> None:
    b = env.b
    dst = env.tile(op.result)

    def finish(index: list[Ix], total: SSAValue, lane: SSAValue | None) -> None:
        with b.when(first_lane(b, lane)):
            store(b, total, dst, index)

    reduce_rows(b, env.threads, env.tile(op.input), op.dim.value.data, finish)


def reduce_max(env: TileEnv, op: block.ReduceMaxOp) -> None:
    """The row maximum in fp32, with the warp and per-thread shapes of
    ``reduce_sum`` (``reduce_rows`` with ``maximum``)."""
    b = env.b
    dst = env.tile(op.result)

    def finish(index: list[Ix], top: SSAValue, lane: SSAValue | None) -> None:
        with b.when(first_lane(b, lane)):
            store(b, top, dst, index)

    src = env.tile(op.input)
    reduce_rows(b, env.threads, src, op.dim.value.data, finish, maximum=True)


def rms_norm(env: TileEnv, op: block.RmsNormOp) -> None:
    b = env.b
    src, dst = env.tile(op.input), env.tile(op.result)
    dim = len(src.shape) - 1
    length = src.shape[dim]

    def finish(index: list[Ix], total: SSAValue, lane: SSAValue | None) -> None:
        mean = b.divf(total, b.f32(float(length)))
        if op.eps_value:
            mean = b.addf(mean, b.f32(op.eps_value))
        scale = b.divf(b.f32(1.0), b.sqrt(mean))

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


def transpose(env: TileEnv, op: block.TransposeOp) -> None:
    """Each result element read from the source at the swapped index."""
    b = env.b
    src, dst = env.tile(op.input), env.tile(op.result)
    i, j = op.dims

    def element(index: list[Ix]) -> None:
        at = list(index)
        at[i], at[j] = at[j], at[i]
        store(b, load(b, src, at), dst, index)

    for_each_element(b, env.threads, dst.shape, element)


LOWERINGS: dict[str, Callable[..., None]] = {
    **{kind: elementwise for kind in elementwise_kinds("block")},
    "rms_norm": rms_norm,
    "reduce_sum": reduce_sum,
    "reduce_max": reduce_max,
    "concat": concat,
    "transpose": transpose,
    "matmul": block_matmul,
    "thread_graph": thread_graph,
}
"""Lowering of each compute op of a block graph, by ``KIND``."""


def kind_of(op: Operation) -> str:
    return "thread_graph" if isinstance(op, block.ThreadGraphOp) else op.KIND  # type: ignore[attr-defined]
