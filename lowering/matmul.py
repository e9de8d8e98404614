"""Lowering of ``block.matmul``: tensor cores where the shapes allow, else FMA.

Tensor-core path (f16 or bf16 operands of one type, K a multiple of 16, N a
multiple of 8): the output tile is cut into warp tasks of 16 rows by
``8 * nb`` columns; each warp walks its tasks, and for every 16-deep slice of
K loads one A fragment with ``ldmatrix.x4`` and ``nb`` B fragments with
``ldmatrix.x2.trans`` (B is stored K-major, row-major in shared memory), then
issues ``nb`` ``mma.m16n8k16`` with fp32 accumulators carried in registers.
Rows past M (tiles with fewer than 16 rows, as in batch-1 GEMV-like products)
read a clamped row and are not stored. An epilogue writes each result
element: a plain store, an add into the fp32 accumulator when the product
feeds ``block.forloop_accum`` directly, or an element-wise op applied on the
way (``exp(Q·K)``).
:func:`block_matmul` is the one entry point for a ``block.matmul`` op, fused
with its user or not.

Fallback: one thread per output element with an fp32 dot product.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import SSAValue

from mirage_xdsl.dialects import block
from mirage_xdsl.dialects.gpux import MMA_C, LdmatrixOp, MmaOp, is_mma_operand
from mirage_xdsl.lowering.gpu_builder import GpuBuilder, Ix
from mirage_xdsl.lowering.tiles import (
    Threads,
    TileEnv,
    TileRef,
    broadcast_index,
    compute,
    for_each_element,
    load,
    numel,
    store,
)

MMA_M, MMA_N, MMA_K = 16, 8, 16


def tensor_core_ok(a: TileRef, bt: TileRef) -> bool:
    """Whether ``a @ b`` can use mma.m16n8k16 with these shared tiles: both
    f16 or both bf16 (one instruction takes one operand type)."""
    return (
        is_mma_operand(a.dtype)
        and a.dtype == bt.dtype
        and shapes_allow_tensor_cores(a.shape[-1], bt.shape[-1])
    )


def shapes_allow_tensor_cores(k: int, n: int) -> bool:
    """Whether K and N fit mma.m16n8k16; also asked before the tiles exist
    (the shared-memory plan pads rows that ``ldmatrix`` will read)."""
    return k % MMA_K == 0 and n % MMA_N == 0


def _batch_index(b: GpuBuilder, flat: Ix, shape: Sequence[int]) -> list[Ix]:
    return b.unravel(flat, shape[:-2]) if len(shape) > 2 else []


Epilogue = Callable[[GpuBuilder, SSAValue, TileRef, list[Ix]], None]
"""Writes one fp32 result element of the product into the destination tile."""


def store_result(b: GpuBuilder, value: SSAValue, dst: TileRef, index: list[Ix]) -> None:
    store(b, value, dst, index)


def accumulate_result(
    b: GpuBuilder, value: SSAValue, dst: TileRef, index: list[Ix]
) -> None:
    """``dst += value``: the product feeds a plain for-loop accumulator."""
    store(b, b.addf(b.load_f32(dst.mem, dst.at(index)), value), dst, index)


def apply_after(kind: str) -> Epilogue:
    """Epilogue applying an element-wise op to each product element."""

    def epilogue(b: GpuBuilder, value: SSAValue, dst: TileRef, index: list[Ix]) -> None:
        store(b, compute(b, kind, value), dst, index)

    return epilogue


def lower_tensor_core(
    b: GpuBuilder,
    threads: Threads,
    a: TileRef,
    bt: TileRef,
    dst: TileRef,
    epilogue: Epilogue,
) -> None:
    m, k = a.shape[-2], a.shape[-1]
    n = bt.shape[-1]
    batch = numel(dst.shape[:-2])
    n8 = n // MMA_N
    nb = next(c for c in (4, 2, 1) if n8 % c == 0)
    m_tiles = -(-m // MMA_M)
    tasks = batch * m_tiles * (n8 // nb)
    lane = threads.lane

    def task(t: Ix) -> None:
        bi = b.div(t, m_tiles * (n8 // nb))
        mi = b.rem(b.div(t, n8 // nb), m_tiles)
        ni = b.rem(t, n8 // nb)
        bidx = _batch_index(b, bi, dst.shape)
        a_batch = broadcast_index(bidx, a.shape[:-2])  # a batch of 1 broadcasts
        b_batch = broadcast_index(bidx, bt.shape[:-2])
        m0 = b.mul(mi, MMA_M)
        n0 = b.mul(ni, nb * MMA_N)
        a_row = b.add(m0, b.rem(lane, 16))
        if m % MMA_M:
            a_row = b.min(a_row, m - 1)
        a_col = b.mul(b.div(lane, 16), 8)
        b_row = b.rem(lane, 16)

        def step(kk: SSAValue, accs: Sequence[SSAValue]) -> Sequence[SSAValue]:
            k0 = b.mul(kk, MMA_K)
            frag_a = b.value(
                LdmatrixOp(
                    a.mem,
                    [b.index(i) for i in a.at([*a_batch, a_row, b.add(k0, a_col)])],
                    4,
                    False,
                )
            )
            out = []
            for j, acc in enumerate(accs):
                col = b.add(n0, j * MMA_N)
                frag_b = b.value(
                    LdmatrixOp(
                        bt.mem,
                        [b.index(i) for i in bt.at([*b_batch, b.add(k0, b_row), col])],
                        2,
                        True,
                    )
                )
                out.append(b.value(MmaOp(frag_a, frag_b, acc)))
            return out

        accs = b.loop(0, k // MMA_K, 1, step, [b.zeros(MMA_C) for _ in range(nb)])
        group = b.div(lane, 4)
        pair = b.mul(b.rem(lane, 4), 2)
        for j, acc in enumerate(accs):
            for half in range(2):
                row = b.add(b.add(m0, group), 8 * half)
                guard = b.lt(row, m) if m % MMA_M else None
                with b.when(guard):
                    for e in range(2):
                        col = b.add(b.add(n0, j * MMA_N + e), pair)
                        value = b.extract(acc, 2 * half + e)
                        epilogue(b, value, dst, [*bidx, row, col])

    b.strided(threads.warp, tasks, threads.warps, task)


def lower_fma(
    b: GpuBuilder,
    threads: Threads,
    a: TileRef,
    bt: TileRef,
    dst: TileRef,
    epilogue: Epilogue,
) -> None:
    k = a.shape[-1]

    def element(index: list[Ix]) -> None:
        *bidx, row, col = index

        def dot(kk: SSAValue, acc: Sequence[SSAValue]) -> Sequence[SSAValue]:
            x = load(b, a, [*bidx, row, kk])
            y = load(b, bt, [*bidx, kk, col])
            return [b.addf(acc[0], b.mulf(x, y))]

        (total,) = b.loop(0, k, 1, dot, [b.f32(0.0)])
        epilogue(b, total, dst, index)

    for_each_element(b, threads, dst.shape, element)


def lower_matmul(
    b: GpuBuilder,
    threads: Threads,
    a: TileRef,
    bt: TileRef,
    dst: TileRef,
    epilogue: Epilogue = store_result,
) -> None:
    """``epilogue(a @ b)`` into ``dst``, over the last two dims, batched over the rest."""
    if tensor_core_ok(a, bt):
        lower_tensor_core(b, threads, a, bt, dst, epilogue)
    else:
        lower_fma(b, threads, a, bt, dst, epilogue)


def block_matmul(
    env: TileEnv,
    op: block.MatmulOp,
    dst: TileRef | None = None,
    epilogue: Epilogue = store_result,
) -> None:
    """``op`` over its operand tiles, into its own result tile.

    A matmul fused with its only user writes into that user's tile instead:
    ``dst``, through ``epilogue``.
    """
    out = env.tile(op.result) if dst is None else dst
    lower_matmul(env.b, env.threads, env.tile(op.lhs), env.tile(op.rhs), out, epilogue)
