"""Grid and for-loop sizes: the one-kernel forms they must make reachable.

Programs at shapes other than the workloads': a row-wise reduction whose row
fits one block's shared memory comes out as one kernel whose grid splits only
the rows (a few rows per block, every row whole), and attention fuses Q·K
into the for-loop at head dims 64, 128 and 256.
"""

from __future__ import annotations

import pytest
from test_search import assert_same_function, block_kinds, only_customized
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.dialects import block
from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.search import labels as L
from mirage_xdsl.search.block_layout import Layout
from mirage_xdsl.search.instantiate import (
    ROW_TILES,
    TILES,
    _grid_splits,
    size_choices,
)
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.superoptimizer import superoptimize_function
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.verify import equivalent

ONE_DEEP = SearchOptions(jobs=1, max_kernels=1, budget=300.0)


def _softmax(rows: int, width: int) -> ModuleOp:
    g = new_kernel_graph("softmax")
    e = g.exp(g.new_input((rows, width)))
    g.mark_output(g.div(e, g.reduction(e, 1)))
    return g.module()


def _l2_normalize(rows: int, width: int) -> ModuleOp:
    g = new_kernel_graph("l2_normalize")
    x = g.new_input((rows, width))
    g.mark_output(g.div(x, g.sqrt(g.reduction(g.square(x), 1))))
    return g.module()


def _residual_rms_norm(rows: int, width: int) -> ModuleOp:
    g = new_kernel_graph("residual_rms_norm")
    x, r = g.new_input((rows, width)), g.new_input((rows, width))
    g.mark_output(g.rms_norm(g.add(x, r)))
    return g.module()


def _attention(head_dim: int, rows: int = 64, keys: int = 512) -> ModuleOp:
    g = new_kernel_graph(f"attention_d{head_dim}")
    q = g.new_input((1, rows, head_dim))
    k = g.new_input((1, head_dim, keys))
    v = g.new_input((1, keys, head_dim))
    e = g.exp(g.matmul(q, k))
    g.mark_output(g.matmul(g.div(e, g.reduction(e, 2)), v))
    return g.module()


def test_row_tiles_only_without_a_matmul() -> None:
    assert _grid_splits(64) == [64 // t for t in TILES if 64 // t >= 2]
    assert _grid_splits(64, whole_rows=True)[-len(ROW_TILES) :] == [8, 16, 32, 64]
    assert _grid_splits(16, whole_rows=True) == [16]  # small axes: one per index


def test_a_loop_without_a_matmul_may_take_a_few_rows_per_block() -> None:
    """A kernel that walks a for-loop but multiplies nothing (the combine of
    a FlashDecoding split, summing 16 parts of 256 query rows) may give each
    block fewer rows than a tensor-core tile, so that enough blocks share
    the work and each block's few loads are all in flight at once (the
    GQA combine over 4 rows a block took 7.09 µs on the H100, over 16 rows
    7.40); one with a matmul keeps tiles of 16 rows or more."""
    rows, parts = L.axis(0), L.axis(1)
    layout = Layout(sources=(0,), grid=(rows,), loop=parts)
    sizes = {rows: 256, parts: 1024}

    def most_blocks(matmul: bool) -> int:
        choices = size_choices(layout, [], sizes, SearchOptions(), matmul=matmul)
        return max(s.grid[0] for s in choices)

    assert most_blocks(matmul=False) == 256
    assert most_blocks(matmul=True) == 256 // 16


@pytest.mark.parametrize(
    "build, shape",
    [
        (_softmax, (64, 4096)),
        (_l2_normalize, (32, 8192)),
        (_residual_rms_norm, (24, 2048)),
    ],
    ids=["softmax", "l2_normalize", "residual_rms_norm"],
)
def test_row_wise_program_becomes_one_kernel_of_whole_rows(build, shape) -> None:
    program = build(*shape)
    outcome = superoptimize_function(
        entry_function(program), ONE_DEEP, cache_dir="none"
    )
    op = only_customized(outcome)
    assert op.forloop == 1
    rows = op.grid_dims[0]
    assert rows > 1 and op.grid_dims[1:] == (1, 1)
    for tile in (o for o in op.walk() if isinstance(o, block.InputOp)):
        assert list(tile.input_map) == [0, -1, -1]  # every row whole
        assert tile.forloop_dim == -1
    assert_same_function(program, outcome)
    assert equivalent(program, ModuleOp([outcome.function.clone()])).equivalent


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_attention_fuses_q_k_into_the_for_loop(head_dim: int) -> None:
    program = _attention(head_dim)
    outcome = superoptimize_function(
        entry_function(program), ONE_DEEP, cache_dir="none"
    )
    op = only_customized(outcome)
    assert block_kinds(op).count("matmul") == 2
    assert op.forloop > 1
    loop_inputs = [o.forloop_dim for o in op.walk() if isinstance(o, block.InputOp)]
    assert sorted(loop_inputs) == [-1, 1, 2]  # Q stays; K and V walk the keys
    assert_same_function(program, outcome)


def test_two_op_program_completes_its_search() -> None:
    """A residual add then RMSNorm, 8 x 4096, two kernels deep: the first
    depth finds the one-kernel form, and no two-kernel µGraph can beat it by
    the cost model, so the second depth is not searched at all."""
    program = _residual_rms_norm(8, 4096)
    options = SearchOptions(jobs=1, max_kernels=2, budget=300.0)
    outcome = superoptimize_function(entry_function(program), options, cache_dir="none")
    report = outcome.report
    assert report.stopped == ""
    assert len(report.tasks) == 1 and report.bounded > 1000
    assert report.kernels_after == 1
    assert_same_function(program, outcome)


@pytest.mark.parametrize(
    "k, lhs, fits",
    [(4096, "norm", False), (4096, "input", True), (1024, "norm", True)],
)
def test_dots_fit_shared_memory_or_are_split_by_the_lowering(
    k: int, lhs: str, fits: bool
) -> None:
    """A normalised row times a whole-K weight strip of 16 columns: at
    K = 4096 its tensor-core operands (rows padded to 16) take 256 KB, more
    than a block has, and nothing can split a computed row, so the size is
    no candidate; read straight from memory, the Triton lowering splits the
    same product along K; at K = 1024 it fits as it is."""
    from mirage_xdsl.search.instantiate import dots_fit
    from mirage_xdsl.search.ugraph import BlockGraph, BlockInput, Op

    inputs = (BlockInput(0, (-1, -1, -1), -1), BlockInput(1, (1, -1, -1), -1))
    x = 2 if lhs == "norm" else 0
    ops = (Op("rms_norm", (0,)), Op("matmul", (x, 1)))
    graph = BlockGraph((256, 1, 1), 1, inputs, ops, ((3, (1, -1, -1)),))
    tiles = [(1, k), (k, 16), (1, k), (1, 16)]
    assert dots_fit(graph, tiles, 2) == fits
