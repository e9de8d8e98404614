"""An analytic cost model of a µGraph on an H100, for ranking candidates.

Each kernel costs its launch plus the slowest of its resources, as in a
roofline: device-memory bytes (every tensor read once from DRAM, and tiles
loaded again by other blocks served from L2), L2-to-SM bytes, shared-memory
traffic of the block ops (thread graphs keep their intermediates in
registers), tensor-core FLOPs of block matmuls (padded to the mma shape) and
CUDA-core FLOPs of the rest. A grid with fewer blocks than SMs leaves
bandwidth and compute idle, a block streams its tiles no faster than its own
warps move them (:func:`block_streaming`), a for-loop streams no faster than
its blocks' tiles in flight allow (:func:`streaming_bandwidth`), each for-loop
iteration adds latency that pipelining does not hide completely, and a block
holding more at once than an SM's registers spills (:func:`spills`). Library
ops (the input program) are costed as ideal vendor kernels: inputs read and
output written once (a transpose like any element-wise copy); a reshape,
which the lowering makes an alias of its operand's buffer, costs nothing.

The numbers are the target's (``gpu_target.Target``, :data:`H100` by
default; ``Target`` and ``H100`` are importable from here too), the ones
DESIGN.md measured or quotes; they are only needed to be right in
proportion, since on a GPU measured time can replace them (``measure=`` of
the search).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mirage_xdsl.gpu_target import H100, Target
from mirage_xdsl.ops import OPS
from mirage_xdsl.search.ugraph import (
    ELEMENTWISE,
    BlockGraph,
    KernelOp,
    Shape,
    UGraph,
    block_shapes,
    kernel_shapes,
)

ELEMENT_BYTES = {"f16": 2, "bf16": 2, "f32": 4}
ACCUMULATOR_BYTES = 4


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _pad(x: int, m: int) -> int:
    return -(-x // m) * m


MMA_ROWS = 16
"""Rows of a tensor-core (``tl.dot``) product; a block matmul of fewer rows
runs as multiply-and-sum on the CUDA cores."""


def matmul_flops(a: Shape, b: Shape, mma: bool = False) -> int:
    """2·m·n·k per batch; padded to the 16x8x16 mma tile on tensor cores. A
    right operand of one batch makes the batches' rows one product, whose
    rows together are padded (``triton_tiles.dot_rows``)."""
    m, k, n = a[-2], a[-1], b[-1]
    batches = numel(a[:-2])
    if mma:
        n, k = _pad(n, 8), _pad(k, 16)
        if numel(b[:-2]) == 1:
            m, batches = _pad(m * batches, MMA_ROWS), 1
        else:
            m = _pad(m, MMA_ROWS)
    return 2 * m * n * k * batches


def op_flops(kind: str, operands: Sequence[Shape], out: Shape) -> int:
    """FLOPs of one op: a matmul's own count, else the op table's ``flops``
    per element of its largest operand or result."""
    if kind == "matmul":
        return matmul_flops(operands[0], operands[1])
    return OPS[kind].flops * max(numel(s) for s in (*operands, out))


def smem_bytes(graph: BlockGraph, tiles: Sequence[Shape], elem: int) -> int:
    """Peak shared memory of a block graph by liveness in program order.

    Same rule as ``customized.shared_memory_bytes`` (accumulators live for the
    whole kernel, kept in fp32), but values inside a thread graph stay in
    registers.
    """
    first = len(graph.inputs)
    in_registers = set()
    for group in graph.fused:
        members = {first + i for i in group}
        used_outside = {
            v
            for j, op in enumerate(graph.ops)
            if first + j not in members
            for v in op.operands
        } | {v for v, _ in graph.outputs}
        in_registers |= members - used_outside
    last_use: dict[int, int] = {}
    for j, op in enumerate(graph.ops):
        for v in op.operands:
            last_use[v] = first + j
    for v, _ in graph.outputs:
        last_use[v] = first + len(graph.ops)
    peak = 0
    live: dict[int, tuple[int, int]] = {}
    for v in range(len(tiles)):
        if v in in_registers:
            continue
        is_accum = v >= first and graph.ops[v - first].kind == "forloop_accum"
        size = numel(tiles[v]) * (ACCUMULATOR_BYTES if is_accum else elem)
        end = len(tiles) if is_accum else last_use.get(v, v)
        live[v] = (end, size)
        peak = max(peak, sum(s for e, s in live.values() if e >= v))
        live = {u: (e, s) for u, (e, s) in live.items() if e > v}
    return peak


@dataclass(frozen=True)
class KernelCost:
    seconds: float
    dram_bytes: int
    l2_bytes: int
    smem_bytes: int
    flops: int
    blocks: int


def library_cost(
    op: KernelOp, ins: Sequence[Shape], out: Shape, elem: int, target: Target
) -> KernelCost:
    moved = elem * (sum(numel(s) for s in ins) + numel(out))
    flops = op_flops(op.kind, ins, out)
    peak = target.tensor_flops if op.kind == "matmul" else target.cuda_flops
    seconds = max(moved / target.dram_bandwidth, flops / peak)
    seconds += target.load_latency_seconds
    return KernelCost(
        seconds + target.launch_seconds, moved, moved, 0, flops, target.sms
    )


def customized_cost(
    graph: BlockGraph,
    ins: Sequence[Shape],
    outs: Sequence[Shape],
    elem: int,
    target: Target,
) -> KernelCost:
    tiles = block_shapes(graph, ins)
    blocks = numel(graph.grid)
    iters = graph.forloop
    first = len(graph.inputs)
    dram = elem * (
        sum(numel(ins[i.source]) for i in graph.inputs) + sum(numel(o) for o in outs)
    )
    l2 = (
        elem
        * blocks
        * sum(
            numel(tiles[v]) * (iters if i.fmap != -1 else 1)
            for v, i in enumerate(graph.inputs)
        )
    )
    if l2 > target.l2_bytes:
        dram = max(dram, l2)
    in_loop = _loop_ops(graph)
    fused = {i for g in graph.fused for i in g}
    tensor_flops = cuda_flops = smem = 0
    for j, op in enumerate(graph.ops):
        reps = blocks * (iters if j in in_loop else 1)
        shapes_in = [tiles[v] for v in op.operands]
        out = tiles[first + j]
        if op.kind == "matmul":
            tensor_flops += reps * matmul_flops(shapes_in[0], shapes_in[1], mma=True)
        elif op.kind == "forloop_accum":
            cuda_flops += reps * numel(shapes_in[0])
        else:
            cuda_flops += reps * op_flops(op.kind, shapes_in, out)
        if j in fused and op.kind in ELEMENTWISE:
            continue
        smem += reps * elem * (sum(numel(s) for s in shapes_in) + numel(out))
    for group in graph.fused:
        members = {first + i for i in group}
        reps = blocks * (iters if group[0] in in_loop else 1)
        external = {v for i in group for v in graph.ops[i].operands} - members
        smem += reps * elem * sum(numel(tiles[v]) for v in external)
    active = min(blocks, target.sms)
    share = active / target.sms
    dram_bw = min(target.dram_bandwidth, active * target.sm_dram_bandwidth)
    first_load = l2 / blocks / iters
    loop_elements = sum(
        numel(tiles[v]) for v, i in enumerate(graph.inputs) if i.fmap != -1
    )
    matmul_in_loop = any(graph.ops[j].kind == "matmul" for j in in_loop)
    per_iteration = target.iteration_seconds
    if unrolled(iters, matmul_in_loop, loop_elements):
        first_load *= iters  # every iteration's loads in flight together
    elif iters > 1:
        dram_bw = min(dram_bw, streaming_bandwidth(blocks, first_load, target))
        if rescales(graph) and few_rows(graph, tiles, in_loop):
            per_iteration += target.rescale_seconds
    seconds = max(
        dram / dram_bw,
        l2 / (target.l2_bandwidth * share),
        l2 / block_streaming(blocks, target),
        smem / (target.smem_bandwidth_per_sm * active),
        tensor_flops / (target.tensor_flops * share),
        cuda_flops / (target.cuda_flops * share),
    )
    # Loads overlap compute only across for-loop iterations: the first
    # iteration's tiles (all of them, without a loop) are exposed latency.
    waves = math.ceil(blocks / target.sms)
    seconds += waves * (
        target.load_latency_seconds
        + first_load / target.sm_dram_bandwidth
        + iters * per_iteration
    )
    if spills(graph, tiles, target):
        seconds *= SPILL_SLOWDOWN
    return KernelCost(
        seconds + target.launch_seconds,
        dram,
        l2,
        smem,
        tensor_flops + cuda_flops,
        blocks,
    )


def rescales(graph: BlockGraph) -> bool:
    """Whether a block graph's for-loop keeps running sums shifted by a
    running maximum (``forloop_accum`` with a shift: an online softmax),
    whose iterations, unless the loop is :func:`unrolled` (a combine of a
    few parts, all in registers), cost ``target.rescale_seconds`` each where
    its matmuls have :func:`few_rows`. On the H100,
    one-kernel decode attentions that walk the keys in 8 such iterations
    took 12.3-18.7 µs where this model, without it, had costed them 5.9-7.3;
    the two-kernel forms of the same programs, costed 6.2-6.8, took
    4.8-6.5."""
    return graph.forloop > 1 and any(
        op.kind == "forloop_accum" and len(op.operands) > 1 for op in graph.ops
    )


def few_rows(graph: BlockGraph, tiles: Sequence[Shape], in_loop: set[int]) -> bool:
    """Whether a matmul of the for-loop has fewer than :data:`MMA_ROWS` rows
    (a decode attention's one or few query rows per block), so that each
    iteration is a short chain of dependent steps with little to overlap it
    with, where a prefill tile of many rows keeps the tensor cores busy
    between them."""
    first = len(graph.inputs)
    return any(
        graph.ops[j].kind == "matmul" and tiles[first + j][-2] < MMA_ROWS
        for j in in_loop
    )


SPILL_SLOWDOWN = 4.0
"""How much slower a kernel whose blocks spill (:func:`spills`) runs than its
other resources say. On the H200, three one-kernel decode projections whose
blocks each held a whole-K weight strip of 64K elements took 1.35, 5.4 and
7.5 times what this model had costed them (12.0 µs for 8.9, 199.9 for 36.6,
60.0 for 8.0), where the o projection's form with half the strip took 1.04
times (6.8 µs for 6.5)."""


def spills(graph: BlockGraph, tiles: Sequence[Shape], target: Target) -> bool:
    """Whether a block holds more at once than an SM's registers: the tiles
    of its inputs for one for-loop iteration (all of them, without a loop),
    each element in fp32 as the kernels compute. What does not fit is
    spilled to local memory and read back op by op (a block holding a
    2048 x 32 weight strip whole, for a one-row product without a loop)."""
    held = sum(numel(tiles[v]) for v in range(len(graph.inputs)))
    return held * ACCUMULATOR_BYTES > target.registers_per_sm * 4


UNROLL_ITERATIONS = 64
UNROLL_ELEMENTS = 8192


def unrolled(iterations: int, matmul_in_loop: bool, loop_elements: int) -> bool:
    """Whether a for-loop is unrolled (the Triton printer's
    ``tl.static_range``): a short loop without a matmul whose tiles of every
    iteration (``loop_elements`` per iteration) fit in registers together, so
    its loads are all in flight at once instead of one round trip per
    iteration (a split-K combine summing its parts, a short reduction)."""
    return (
        1 < iterations <= UNROLL_ITERATIONS
        and not matmul_in_loop
        and iterations * loop_elements <= UNROLL_ELEMENTS
    )


RESIDENT_BLOCKS = 4
"""Blocks an SM runs at once, about (what registers and shared memory allow
a typical generated kernel)."""


def streaming_bandwidth(blocks: int, tile_bytes: float, target: Target) -> float:
    """What a for-loop's loads can pull from memory: each resident block has
    one iteration's tiles (``tile_bytes``) in flight per load round trip.
    A grid of few blocks with thin tiles (a matrix-vector product over narrow
    column strips) is bound by this, not by the memory's bandwidth: what
    split-K and deep tiles buy."""
    resident = min(blocks, RESIDENT_BLOCKS * target.sms)
    return resident * tile_bytes / target.load_latency_seconds


def block_streaming(blocks: int, target: Target) -> float:
    """What a grid's blocks stream together when each moves its tiles at
    ``target.block_bandwidth`` (loads issued, layouts changed, arithmetic
    done by its own warps), with up to :data:`RESIDENT_BLOCKS` running on
    each SM at once. A grid of few blocks over a long loop (one block per
    head walking a thousand keys) is bound by this, however few bytes it
    reads in all: what splitting the loop's axis over more blocks buys."""
    return min(blocks, RESIDENT_BLOCKS * target.sms) * target.block_bandwidth


def _loop_ops(graph: BlockGraph) -> set[int]:
    """Positions of the ops that run on every for-loop iteration."""
    first = len(graph.inputs)
    loop = {v for v, i in enumerate(graph.inputs) if i.fmap != -1}
    out = set()
    for j, op in enumerate(graph.ops):
        if op.kind != "forloop_accum" and any(v in loop for v in op.operands):
            loop.add(first + j)
            out.add(j)
    return out


def kernel_costs(ug: UGraph, target: Target = H100) -> list[KernelCost]:
    elem = ELEMENT_BYTES.get(ug.dtype, 2)
    shapes_ = kernel_shapes(ug)
    out: list[KernelCost] = []
    next_tensor = len(ug.inputs)
    for op in ug.ops:
        ins = [shapes_[v] for v in op.operands]
        results = shapes_[next_tensor : next_tensor + op.n_results]
        next_tensor += op.n_results
        if op.kind == "reshape":
            out.append(KernelCost(0.0, 0, 0, 0, 0, 0))  # a buffer alias, no launch
        elif op.graph is None:
            out.append(library_cost(op, ins, results[0], elem, target))
        else:
            out.append(customized_cost(op.graph, ins, results, elem, target))
    return out


def cost(ug: UGraph, target: Target = H100) -> float:
    """Estimated seconds to run the µGraph once."""
    return sum(k.seconds for k in kernel_costs(ug, target))
