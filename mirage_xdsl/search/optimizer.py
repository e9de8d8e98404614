"""The µGraph optimizer: choices that do not change what a graph computes.

After a candidate is found and before it is costed, each block graph gets:

- an *operator order* that lowers peak shared memory: a list schedule that
  runs, among the ready ops, the one that frees the most bytes (ties keep the
  generator's order), so a candidate too big in one order can still fit;
- *thread graphs* by rule-based fusion (as the original project does, not by
  search): a run of element-wise ops, each consuming the previous one's
  result in the same loop phase, becomes one ``block.thread_graph`` whose
  intermediates live in registers instead of shared memory;
- *shared-memory planning*: the peak by liveness (accumulators in fp32 for
  the whole kernel) must fit the target's per-block limit, else the
  candidate is dropped;
- *threads per block*: 128, or 256 when the largest tile has room for 8
  warps of 16x16 fragments, within the user's ``blockdims`` list if given.

Tensor layouts are not a choice in the dialects (tiles are row-major), so
there is nothing to optimise there yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from mirage_xdsl.search.cost_model import (
    ACCUMULATOR_BYTES,
    H100,
    Target,
    _loop_ops,
    numel,
    smem_bytes,
)
from mirage_xdsl.search.ugraph import (
    ELEMENTWISE,
    BlockGraph,
    KernelOp,
    Op,
    Shape,
    UGraph,
    block_shapes,
    kernel_shapes,
)

Triple = tuple[int, int, int]


def reorder(graph: BlockGraph, tiles: Sequence[Shape], elem: int) -> BlockGraph:
    """Topological order of the block ops that keeps little alive at once."""
    first = len(graph.inputs)
    n = len(graph.ops)
    users: dict[int, set[int]] = {}
    for j, op in enumerate(graph.ops):
        for v in op.operands:
            users.setdefault(v, set()).add(j)
    outputs = {v for v, _ in graph.outputs}
    done: set[int] = set()
    order: list[int] = []

    def size(v: int) -> int:
        accum = v >= first and graph.ops[v - first].kind == "forloop_accum"
        return numel(tiles[v]) * (ACCUMULATOR_BYTES if accum else elem)

    while len(order) < n:
        ready = [
            j
            for j in range(n)
            if j not in done
            and all(v < first or v - first in done for v in graph.ops[j].operands)
        ]

        def gain(j: int) -> tuple[int, int]:
            freed = sum(
                size(v)
                for v in set(graph.ops[j].operands)
                if v not in outputs and users[v] - done == {j}
            )
            return (size(first + j) - freed, j)

        j = min(ready, key=gain)
        done.add(j)
        order.append(j)
    return _permute(graph, order)


def _permute(graph: BlockGraph, order: list[int]) -> BlockGraph:
    first = len(graph.inputs)
    new_index = {v: v for v in range(first)}
    for new, old in enumerate(order):
        new_index[first + old] = first + new
    ops = tuple(
        Op(op.kind, tuple(new_index[v] for v in op.operands), op.attrs)
        for op in (graph.ops[j] for j in order)
    )
    outputs = tuple((new_index[v], omap) for v, omap in graph.outputs)
    return replace(graph, ops=ops, outputs=outputs, fused=())


def fuse_thread_graphs(graph: BlockGraph) -> BlockGraph:
    """Group runs of dependent element-wise ops into thread graphs."""
    first = len(graph.inputs)
    in_loop = _loop_ops(graph)
    groups: list[list[int]] = []
    current: list[int] = []
    for j, op in enumerate(graph.ops):
        joins = (
            op.kind in ELEMENTWISE
            and current
            and current[-1] == j - 1
            and (j in in_loop) == (current[0] in in_loop)
            and any(v - first in current for v in op.operands)
        )
        if joins:
            current.append(j)
            continue
        if len(current) > 1:
            groups.append(current)
        current = [j] if op.kind in ELEMENTWISE else []
    if len(current) > 1:
        groups.append(current)
    return replace(graph, fused=tuple(tuple(g) for g in groups))


def threads(tiles: Sequence[Shape], choices: Sequence[Triple] = ()) -> Triple:
    largest = max((numel(t) for t in tiles), default=0)
    want = 256 if largest >= 8 * 16 * 16 * 8 else 128
    if not choices:
        return (want, 1, 1)
    fitting = [c for c in choices if numel(c) <= want] or list(choices)
    return max(fitting, key=numel)


def optimize_block(
    graph: BlockGraph,
    sources: Sequence[Shape],
    elem: int,
    blockdims: Sequence[Triple] = (),
    target: Target = H100,
) -> BlockGraph | None:
    """The optimised block graph, or None when it cannot fit shared memory."""
    tiles = block_shapes(graph, sources)
    graph = fuse_thread_graphs(reorder(graph, tiles, elem))
    tiles = block_shapes(graph, sources)
    if smem_bytes(graph, tiles, elem) > target.shared_memory_per_block:
        return None
    return replace(graph, block=threads(tiles, blockdims))


def optimize(
    ug: UGraph, blockdims: Sequence[Triple] = (), target: Target = H100
) -> UGraph | None:
    """Optimise every customized kernel; None if one cannot fit."""
    from mirage_xdsl.search.cost_model import ELEMENT_BYTES

    elem = ELEMENT_BYTES.get(ug.dtype, 2)
    shapes_ = kernel_shapes(ug)
    ops: list[KernelOp] = []
    for op in ug.ops:
        if op.graph is None:
            ops.append(op)
            continue
        graph = optimize_block(
            op.graph, [shapes_[v] for v in op.operands], elem, blockdims, target
        )
        if graph is None:
            return None
        ops.append(replace(op, graph=graph))
    return replace(ug, ops=tuple(ops))
