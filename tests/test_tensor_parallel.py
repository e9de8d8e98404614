"""Tensor-parallel programs without torch: ``kernel.all_reduce``, the stages a
shard's program is cut into, the sharded interpreter and the verifier.

The programs are Megatron's: a gated MLP with the gate and up projections split
by columns and the down projection by rows, and an attention block with its
query and key/value heads split; one all-reduce per block.
"""

from __future__ import annotations

import numpy as np
import pytest

from mirage_xdsl.dialects import kernel
from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.ir.collectives import split_stages
from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.semantics.interpreter import entry_function, run
from mirage_xdsl.semantics.sharding import (
    REPLICATE,
    Shard,
    ShardedProgram,
    ShardingError,
    run_sharded,
)
from mirage_xdsl.verify.sharded import equivalent_sharded

D, F = 16, 32


def mlp(ffn: int, shards: int | None, residual: bool = True):
    """``x + down(silu(x @ gate) * (x @ up))``, its sum over ``shards``
    before the residual add (none: a one-shard program)."""
    g = new_kernel_graph("mlp")
    x = g.new_input((2, D))
    gate, up, down = g.new_input((D, ffn)), g.new_input((D, ffn)), g.new_input((ffn, D))
    y = g.matmul(g.mul(g.silu(g.matmul(x, gate)), g.matmul(x, up)), down)
    if shards is not None:
        y = g.all_reduce(y, shards)
    g.mark_output(g.add(y, x) if residual else y)
    return g.module()


MLP_INPUTS = (REPLICATE, Shard(1), Shard(1), Shard(0))


def attention(heads: int, kv_heads: int, shards: int | None):
    """Decode attention over a cache: ``q = x @ wq`` split into heads, grouped
    heads stacked as rows, ``softmax(q k^T) v``, then ``@ wo``; also returns
    the new token's keys (the cache write), which stay split by heads."""
    d, keys, group = 8, 16, heads // kv_heads
    g = new_kernel_graph("attention")
    x = g.new_input((1, D))
    wq, wk = g.new_input((D, heads * d)), g.new_input((D, kv_heads * d))
    kc, vc = g.new_input((kv_heads, d, keys)), g.new_input((kv_heads, keys, d))
    wo = g.new_input((heads * d, D))
    q = g.reshape(g.matmul(x, wq), (kv_heads, group, d))
    e = g.exp(g.matmul(q, kc))
    o = g.matmul(g.div(e, g.reduction(e, 2)), vc)
    y = g.matmul(g.reshape(o, (1, heads * d)), wo)
    g.mark_output(g.all_reduce(y, shards) if shards is not None else y)
    g.mark_output(g.reshape(g.matmul(x, wk), (kv_heads, 1, d)))
    return g.module()


ATTENTION_INPUTS = (REPLICATE, Shard(1), Shard(1), Shard(0), Shard(0), Shard(0))
ATTENTION_OUTPUTS = (REPLICATE, Shard(0))


def inputs_of(module, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    fn = entry_function(module)
    return [
        rng.uniform(-0.5, 0.5, tuple(t.get_shape())).astype(np.float16)
        for t in fn.function_type.inputs
    ]


def test_stages_cut_at_each_all_reduce() -> None:
    """The MLP's shard is two stages: everything up to the down projection,
    then the residual add reading the sum and the input."""
    staged = split_stages(entry_function(mlp(F // 2, 2)))
    first, second = staged.stages
    assert [op.name for op in entry_function(first.module).body.block.ops] == [
        "kernel.matmul",
        "kernel.silu",
        "kernel.matmul",
        "kernel.mul",
        "kernel.matmul",
        "func.return",
    ]
    assert [r.input for r in first.reduces] == first.outputs
    assert second.inputs == [first.reduces[0].result, staged.arguments[0]]
    assert second.outputs == staged.results and not second.reduces


def test_independent_work_overlaps_the_collective() -> None:
    """The key projection reads no sum and feeds none: it gets a stage of
    its own after the one the all-reduce needs, to run while the sum is in
    flight; nothing follows the sum."""
    staged = split_stages(entry_function(attention(4, 2, 2)))
    first, overlap, last = staged.stages

    def ops(stage):
        return [op.name for op in entry_function(stage.module).body.block.ops]

    assert ops(first).count("kernel.matmul") == 4 and len(first.reduces) == 1
    assert ops(overlap) == ["kernel.matmul", "kernel.reshape", "func.return"]
    assert not overlap.reduces and overlap.outputs == staged.results[1:]
    assert ops(last) == ["func.return"]


@pytest.mark.parametrize(
    ("name", "full", "shard", "placements"),
    [
        ("mlp", mlp(F, None), mlp(F // 2, 2), (MLP_INPUTS, (REPLICATE,))),
        (
            "attention",
            attention(4, 2, None),
            attention(2, 1, 2),
            (ATTENTION_INPUTS, ATTENTION_OUTPUTS),
        ),
    ],
)
def test_sharded_run_equals_unsharded(name, full, shard, placements) -> None:
    program = ShardedProgram(shard, 2, *placements)
    xs = inputs_of(full)
    per_shard = run_sharded(program, xs)
    for got, want in zip(program.gather(per_shard), run(full, xs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for i, p in enumerate(program.outputs):
        if p == REPLICATE:  # every shard received the same sum
            assert np.array_equal(per_shard[0][i], per_shard[1][i])
    verdict = equivalent_sharded(program, full)
    assert verdict, verdict.reason
    assert verdict.false_positive_bound <= 2.0**-40


def test_verifier_refutes_a_missing_all_reduce() -> None:
    """Without the sum each shard returns its partial product: wrong."""
    program = ShardedProgram(mlp(F // 2, None), 2, MLP_INPUTS, (REPLICATE,))
    verdict = equivalent_sharded(program, mlp(F, None))
    assert not verdict
    assert "shard 0's output #0 differs" in verdict.reason


def test_verifier_refutes_a_residual_added_before_the_sum() -> None:
    """The residual added on every shard before the sum counts it twice."""
    g = new_kernel_graph("mlp")
    x = g.new_input((2, D))
    gate, up, down = (g.new_input(s) for s in ((D, F // 2), (D, F // 2), (F // 2, D)))
    y = g.matmul(g.mul(g.silu(g.matmul(x, gate)), g.matmul(x, up)), down)
    g.mark_output(g.all_reduce(g.add(y, x), 2))
    early = ShardedProgram(g.module(), 2, MLP_INPUTS, (REPLICATE,))
    verdict = equivalent_sharded(early, mlp(F, None))
    assert not verdict and "differs" in verdict.reason


def test_verifier_refutes_a_wrong_placement() -> None:
    """Rows of the gate projection where columns belong: the shapes differ."""
    program = ShardedProgram(mlp(F // 2, 2), 2, MLP_INPUTS, (REPLICATE,))
    program.inputs = (REPLICATE, Shard(0), Shard(1), Shard(0))
    verdict = equivalent_sharded(program, mlp(F, None))
    assert not verdict
    assert verdict.reason.startswith("signatures differ: input #1 is")


def test_verifier_refutes_an_output_placement() -> None:
    """The keys' pieces are split by heads (dim 0), not along dim 2."""
    program = ShardedProgram(
        attention(2, 1, 2), 2, ATTENTION_INPUTS, (REPLICATE, Shard(2))
    )
    verdict = equivalent_sharded(program, attention(4, 2, None))
    assert not verdict and "output #1" in verdict.reason


def test_a_program_must_agree_with_its_group_size() -> None:
    with pytest.raises(ShardingError, match="sums over 2 shards in a program of 4"):
        ShardedProgram(mlp(F // 2, 2), 4, MLP_INPUTS, (REPLICATE,))
    with pytest.raises(ShardingError, match="has 4 inputs but 3 placements"):
        ShardedProgram(mlp(F // 2, 2), 2, MLP_INPUTS[:3], (REPLICATE,))


def test_interpreter_needs_a_collective() -> None:
    module = mlp(F // 2, 2)
    with pytest.raises(
        MirageError, match="error: 'kernel.all_reduce' sums over 2 shards"
    ):
        run(module, inputs_of(module))
    doubled = run(module, inputs_of(module), collective=lambda x: x + x)
    alone = run(mlp(F // 2, None), inputs_of(module))
    x = inputs_of(module)[0].astype(np.float32)
    np.testing.assert_allclose(doubled[0] - x, 2 * (alone[0] - x), rtol=1e-5)


def test_all_reduce_is_a_kernel_op() -> None:
    assert kernel.AllReduceOp in kernel.Kernel.operations


def test_search_keeps_the_all_reduce_between_segments() -> None:
    """The search optimises the shard's program around its collective: the
    gated product becomes a customized kernel, the all-reduce stays between
    the down projection and the residual add, and the result is still the
    sharded MLP."""
    from mirage_xdsl.search import superoptimize

    found = superoptimize(mlp(F // 2, 2), budget=20, jobs=1, cache_dir="none", log=None)
    names = [op.name for op in entry_function(found).body.block.ops]
    assert names[0] == "kernel.customized" and names.count("kernel.all_reduce") == 1
    assert names[-3:] == ["kernel.all_reduce", "kernel.add", "func.return"]
    program = ShardedProgram(found, 2, MLP_INPUTS, (REPLICATE,))
    verdict = equivalent_sharded(program, mlp(F, None))
    assert verdict, verdict.reason


def test_every_stage_of_a_searched_shard_lowers() -> None:
    """Each stage the GPU runtime compiles is an ordinary program: the
    customized kernels of the searched shard lower to CUDA C."""
    from mirage_xdsl.runtime.api import lower
    from mirage_xdsl.search import superoptimize

    found = superoptimize(mlp(F // 2, 2), budget=20, jobs=1, cache_dir="none", log=None)
    stages = split_stages(entry_function(found)).stages
    assert len(stages) == 2
    for stage in stages:
        assert lower(stage.module).launches


def test_reshapes_of_what_a_stage_reads_are_views() -> None:
    """A reshape of the sum moves nothing: the stage after the sum takes it
    as a view and has no kernel to compile (a GPU program cannot return a
    reshape of its input)."""

    def program(shards: int | None):
        g = new_kernel_graph("f")
        x, w = (
            g.new_input((2, D // (shards or 1))),
            g.new_input((D // (shards or 1), D)),
        )
        y = g.matmul(x, w)
        y = g.all_reduce(y, shards) if shards else y
        g.mark_output(g.reshape(y, (2, 2, D // 2)))
        return g.module()

    staged = split_stages(entry_function(program(2)))
    last = staged.stages[-1]
    assert [op.name for op in last.views] == ["kernel.reshape"]
    assert [op.name for op in entry_function(last.module).body.block.ops] == [
        "func.return"
    ]
    sharded = ShardedProgram(program(2), 2, (Shard(1), Shard(0)), (REPLICATE,))
    xs = inputs_of(program(None))
    got = sharded.gather(run_sharded(sharded, xs))
    np.testing.assert_allclose(got[0], run(program(None), xs)[0], rtol=1e-5, atol=1e-6)
    verdict = equivalent_sharded(sharded, program(None))
    assert verdict, verdict.reason
