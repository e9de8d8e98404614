"""The cost model's account of what a block can hold (a block whose tiles
outgrow an SM's registers spills, and is costed as the H200 ran such kernels)
and of a decode attention's rescaling loop."""

from __future__ import annotations

import dataclasses

import pytest

from mirage_xdsl.ir.builder import new_kernel_graph, new_threadblock_graph
from mirage_xdsl.search.cost_model import (
    H100,
    SPILL_SLOWDOWN,
    cost,
    matmul_flops,
    spills,
)
from mirage_xdsl.search.ugraph import block_shapes, from_function, kernel_shapes
from mirage_xdsl.semantics.interpreter import entry_function


def _one_kernel_gemv(blocks: int, n: int = 2048, k: int = 2048):
    """``x [1, K] @ w [K, N]`` as one kernel without a for-loop: each of
    ``blocks`` blocks holds a whole-K strip of ``N / blocks`` columns."""
    g = new_kernel_graph("gemv")
    x, w = g.new_input((1, k)), g.new_input((k, n))
    bg = new_threadblock_graph((blocks, 1, 1))
    product = bg.matmul(
        bg.new_input(x, (-1, -1, -1), -1), bg.new_input(w, (1, -1, -1), -1)
    )
    bg.new_output(product, (1, -1, -1))
    g.mark_output(*g.customized([x, w], bg))
    return from_function(entry_function(g.module()))


@pytest.mark.parametrize("blocks, spilled", [(128, False), (64, True)])
def test_a_block_holding_a_whole_k_strip_of_64k_elements_spills(blocks, spilled):
    ug = _one_kernel_gemv(blocks)
    (op,) = ug.ops
    tiles = block_shapes(op.graph, kernel_shapes(ug)[: len(ug.inputs)])
    assert spills(op.graph, tiles, H100) is spilled


def test_a_spilling_form_costs_more_than_the_one_with_half_the_strip():
    """The o projection's one-kernel forms on the H200: 128 blocks of 16
    columns took 6.8 µs, 64 blocks of 32 columns 60.0 µs (costed 6.5 and 8.0
    before blocks could spill)."""
    half, whole = cost(_one_kernel_gemv(128)), cost(_one_kernel_gemv(64))
    assert whole > 0.5 * SPILL_SLOWDOWN * half


def _online_softmax_attention(rows: int, keys: int = 1024, loop: int = 8):
    """One kernel of attention over ``keys`` for ``rows`` query rows per key
    head (8 heads of 64): a block per head walks the keys in ``loop``
    iterations, keeping the softmax's sums shifted by a running maximum."""
    g = new_kernel_graph("attention")
    q = g.new_input((1, 8, rows, 64))
    k = g.new_input((1, 8, 64, keys))
    v = g.new_input((1, 8, keys, 64))
    bg = new_threadblock_graph((8, 1, 1), forloop_range=loop)
    s = bg.matmul(bg.new_input(q, (1, -1, -1)), bg.new_input(k, (1, -1, -1), 3))
    m = bg.reduce_max(s, 3)
    e = bg.exp(bg.add(s, bg.neg(m)))
    num = bg.forloop_accum(bg.matmul(e, bg.new_input(v, (1, -1, -1), 2)), "none", m)
    den = bg.forloop_accum(e, "sum", m)
    bg.new_output(bg.div(num, den), (1, -1, -1))
    g.mark_output(*g.customized([q, k, v], bg))
    return from_function(entry_function(g.module()))


def test_a_decode_attentions_rescaling_loop_costs_each_iteration():
    """One query row per block: every iteration of the online softmax pays
    the rescale's chain (on the H100 such one-kernel decode attentions took
    12.3-18.7 µs where they had been costed 5.9-7.3). A prefill tile of 64
    rows keeps the tensor cores busy between those steps and pays nothing."""
    base = dataclasses.replace(H100, rescale_seconds=0.0)
    decode = _online_softmax_attention(rows=1)
    extra = cost(decode) - cost(decode, base)
    assert extra == pytest.approx(8 * H100.rescale_seconds)
    prefill = _online_softmax_attention(rows=64)
    assert cost(prefill) == cost(prefill, base)


def test_batches_sharing_a_weight_are_costed_as_one_dot_of_their_rows() -> None:
    """Eight decode rows times one weight run as one 16-row ``tl.dot``; eight
    batches each with its own right operand are eight dots of 16 rows."""
    shared = matmul_flops((8, 1, 2048), (1, 2048, 64), mma=True)
    assert shared == 2 * 16 * 64 * 2048
    assert matmul_flops((8, 1, 2048), (8, 2048, 64), mma=True) == 8 * shared
    assert matmul_flops((8, 1, 2048), (1, 2048, 64)) == 2 * 8 * 64 * 2048
