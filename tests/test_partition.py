"""Cutting a function into segments at layout ops, and stitching it back."""

from __future__ import annotations

import io

import numpy as np
import pytest
from xdsl.dialects import func

from mirage_xdsl.ir.builder import KernelGraph
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.search import superoptimize
from mirage_xdsl.search.partition import (
    Segment,
    chained,
    groups,
    layout_depths,
    needs_partition,
    partition,
    stages,
    stitch,
)
from mirage_xdsl.semantics.interpreter import entry_function, run
from mirage_xdsl.verify.equivalence import equivalent


def heads_program(rows: int = 16, dim: int = 64, heads: int = 4):
    """x @ W split into heads, a softmax per head, merged back and projected."""
    g = KernelGraph("heads")
    x = g.new_input((1, rows, dim))
    w = g.new_input((1, dim, dim))
    o = g.new_input((1, dim, dim))
    y = g.reshape(g.matmul(x, w), (1, rows, heads, dim // heads))
    y = g.transpose(y, 1, 2)
    e = g.exp(y)
    p = g.div(e, g.reduction(e, 3))
    merged = g.reshape(g.transpose(p, 1, 2), (1, rows, dim))
    g.mark_output(g.add(g.matmul(merged, o), x))
    return g.module()


def inputs(module, seed=0):
    rng = np.random.default_rng(seed)
    fn = entry_function(module)
    return [
        rng.uniform(-0.5, 0.5, a.type.get_shape()).astype(np.float32) for a in fn.args
    ]


def test_layout_depth_counts_the_layout_ops_on_the_way():
    ops = list(entry_function(heads_program()).body.ops)[:-1]
    depths = layout_depths(ops)
    assert [(op.name, depths[op]) for op in ops] == [
        ("kernel.matmul", 0),
        ("kernel.reshape", 1),
        ("kernel.transpose", 2),
        ("kernel.exp", 2),
        ("kernel.reduce_sum", 2),
        ("kernel.div", 2),
        ("kernel.transpose", 3),
        ("kernel.reshape", 4),
        ("kernel.matmul", 4),
        ("kernel.add", 4),
    ]


def test_pieces_keep_layout_ops_between_segments_and_stitch_back():
    module = heads_program()
    fn = entry_function(module)
    assert needs_partition(fn, 9)
    pieces = partition(fn, 9)
    shape = [
        [op.name for op in p.function.body.ops][:-1]
        if isinstance(p, Segment)
        else p.name
        for p in pieces
    ]
    assert shape == [
        ["kernel.matmul"],
        "kernel.reshape",
        "kernel.transpose",
        ["kernel.exp", "kernel.reduce_sum", "kernel.div"],
        "kernel.transpose",
        "kernel.reshape",
        ["kernel.matmul", "kernel.add"],
    ]
    segments = [p for p in pieces if isinstance(p, Segment)]
    # the last segment reads x, an argument of the whole function
    assert segments[2].inputs[-1] is fn.args[0]
    stitched = stitch(fn, pieces, [s.function for s in segments])
    stitched.verify()
    xs = inputs(module)
    from xdsl.dialects.builtin import ModuleOp

    out = run(ModuleOp([stitched]), xs)[0]
    np.testing.assert_allclose(out, run(module, xs)[0], rtol=1e-6)


def test_long_runs_and_chained_matmuls_are_cut():
    g = KernelGraph("mlp")
    x = g.new_input((1, 8, 32))
    ws = [g.new_input((1, 32, 32)) for _ in range(3)]
    h = x
    for w in ws:
        h = g.silu(g.matmul(h, w))
    g.mark_output(h)
    fn = entry_function(g.module())
    runs = chained([op for op in fn.body.ops if not isinstance(op, func.ReturnOp)])
    assert [[op.name for op in r] for r in runs] == [
        ["kernel.matmul", "kernel.silu"]
    ] * 3
    assert len([p for p in partition(fn, 9) if isinstance(p, Segment)]) == 3


def test_stages_put_a_prologue_apart_from_its_matmuls():
    g = KernelGraph("projections")
    x, w = g.new_input((1, 8, 32)), g.new_input((1, 1, 32))
    h = g.mul(g.rms_norm(x, 1e-5), w)
    outs = [g.matmul(h, g.new_input((1, 32, 16))) for _ in range(3)]
    for o in outs:
        g.mark_output(g.silu(o))
    ops = [op for op in entry_function(g.module()).body.ops][:-1]
    assert [[op.name.split(".")[1] for op in s] for s in stages(ops)] == [
        ["rms_norm", "mul"],
        ["matmul", "matmul", "matmul", "silu", "silu", "silu"],
    ]


def test_attention_stays_one_segment():
    g = KernelGraph("attention")
    q, k, v = g.new_input((2, 16, 8)), g.new_input((2, 8, 32)), g.new_input((2, 32, 8))
    e = g.exp(g.matmul(q, k))
    g.mark_output(g.matmul(g.div(e, g.reduction(e, 2)), v))
    fn = entry_function(g.module())
    assert not needs_partition(fn, 9)
    assert len(chained(list(fn.body.ops)[:-1])) == 1


@pytest.mark.parametrize("jobs", [1])
def test_a_program_with_layout_ops_is_searched_by_segments(jobs):
    module = heads_program()
    log = io.StringIO()
    found = superoptimize(module, budget=60, jobs=jobs, cache_dir="none", log=log)
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("superoptimize @heads: 3 segment(s) searched one by one")
    assert (
        len([line for line in lines if line.startswith("superoptimize @heads_s")]) == 3
    )
    names = [op.name for op in entry_function(found).body.ops]
    assert names.count("kernel.reshape") == 2 and names.count("kernel.transpose") == 2
    assert "kernel.customized" in names
    assert equivalent(module, found)
    xs = inputs(module)
    np.testing.assert_allclose(run(found, xs)[0], run(module, xs)[0], rtol=2e-3)


def test_decoder_layer_is_searched_by_segments_and_matches_torch():
    torch = pytest.importorskip("torch")
    from mirage_xdsl.torch import superoptimize as torch_superoptimize
    from mirage_xdsl.torch.models import DecoderLayer, trained

    layer = trained(DecoderLayer(dim=64, heads=4, kv_heads=2, hidden=128)).half()
    x = torch.randn(1, 16, 64).half()
    with torch.no_grad():
        fn = torch_superoptimize(layer, [x], cache_dir="none", budget=120, jobs=2)
        names = [op.name for op in fn.module.walk() if op.name.startswith("kernel.")]
        # the norm with the q/k/v projection (one matmul, sliced three
        # ways), attention, the output projection, the gated MLP and the
        # down projection are fused
        assert names.count("kernel.customized") == 5
        assert names.count("kernel.slice") == 3
        # layout ops, the slices, and the five weights' transposes (q/k/v
        # joined, o, gate, up, down), which the loads take in place
        assert len([n for n in names if n != "kernel.customized"]) == 11 + 3 + 5
        ref = layer.float()(x.float())
        assert float((fn(x).float() - ref).norm() / ref.norm()) < 5e-3


def layernorm_program(rows: int = 8, n: int = 256, lead: tuple[int, ...] = ()):
    """LayerNorm written as eleven plain ops: mean, centre, variance, scale;
    with ``lead``, x is [*lead, rows, n] and the weight and bias are [n]."""
    g = KernelGraph("layernorm")
    x = g.new_input((*lead, rows, n))
    weight = (n,) if lead else (1, n)
    w, b = g.new_input(weight), g.new_input(weight)
    last = len(lead) + 1
    d = g.add(x, g.mul_scalar(g.reduction(x, last), -1.0 / n))
    v = g.mul_scalar(g.reduction(g.mul(d, d), last), 1.0 / n)
    r = g.sqrt(g.add_scalar(v, 1e-5))
    g.mark_output(g.add(g.mul(g.div(d, r), w), b))
    return g.module()


def test_a_layernorm_of_plain_ops_stays_one_segment():
    fn = entry_function(layernorm_program())
    ops = list(fn.body.ops)[:-1]
    assert len(ops) == 11 > 9
    assert needs_partition(fn, 9)
    pieces = partition(fn, 9)
    assert len(pieces) == 1 and isinstance(pieces[0], Segment)
    assert len(list(pieces[0].function.body.ops)) == 12


def test_long_runs_are_cut_where_a_matmuls_work_ends():
    """A residual add stays with the matmul that makes its operand (epilogue),
    a norm goes with the matmuls that read it (prologue), and sibling
    matmuls sharing their operand stay together."""
    g = KernelGraph("blocks")
    x = g.new_input((1, 8, 32))
    w1, w3 = g.new_input((1, 32, 32)), g.new_input((1, 32, 32))
    h = g.add(g.matmul(x, w1), x)
    n = g.mul(g.rms_norm(x, 1e-5), g.new_input((1, 1, 32)))
    a, b = g.matmul(n, w1), g.matmul(n, w3)
    g.mark_output(h)
    g.mark_output(g.mul(g.silu(a), b))
    fn = entry_function(g.module())
    ops = list(fn.body.ops)[:-1]
    assert len(chained(ops)) == 1
    assert [[op.name.split(".")[1] for op in r] for r in groups(ops)] == [
        ["matmul", "add"],
        ["rms_norm", "mul", "matmul", "matmul", "silu", "mul"],
    ]
    assert groups(ops[:2]) == [ops[:2]]
    segments = [p for p in partition(fn, 4) if isinstance(p, Segment)]
    assert [len(list(s.function.body.ops)) - 1 for s in segments] == [2, 6]


def test_the_decoder_layers_residual_adds_and_norms_join_their_matmuls():
    torch = pytest.importorskip("torch")
    from mirage_xdsl.torch import capture
    from mirage_xdsl.torch.models import DecoderLayer

    layer = DecoderLayer(dim=64, heads=4, kv_heads=2, hidden=128).half()
    fn = entry_function(capture(layer, [torch.randn(1, 1, 64).half()]))
    segments = [
        [op.name.split(".")[1] for op in p.function.body.ops][:-1]
        for p in partition(fn, 9)
        if isinstance(p, Segment)
    ]
    for seg in segments:
        if "add" in seg and "matmul" in seg:
            assert seg.index("add") > seg.index("matmul")
        if "rms_norm" in seg:
            assert seg.index("rms_norm") < seg.index("matmul")
    assert ["matmul", "add"] in segments
    assert sum(seg.count("rms_norm") for seg in segments) == 2
    assert all(seg[0] != "add" for seg in segments)


@pytest.mark.parametrize(
    "lead, grid", [((), (8, 1, 1)), ((2,), (2, 8, 1)), ((2, 1), (2, 8, 1))]
)
def test_row_fused_layernorm_is_one_kernel_and_equivalent(lead, grid):
    from mirage_xdsl.search.fusion import row_fused, row_local
    from mirage_xdsl.search.optimizer import optimize
    from mirage_xdsl.search.ugraph import from_function, to_module

    module = layernorm_program(lead=lead)
    ug = from_function(entry_function(module))
    assert row_local(ug)
    fused = optimize(row_fused(ug))
    assert fused is not None and fused.kernels == 1
    graph = fused.ops[0].graph
    assert graph.grid == grid and graph.forloop == 1
    # a [n] weight is read whole by every block, lifted to x's rank
    assert graph.inputs[1].imap == (-1, -1, -1)
    assert graph.inputs[1].rank == (len(lead) + 2 if lead else None)
    found = to_module(fused)
    assert equivalent(module, found)
    xs = inputs(module)
    np.testing.assert_allclose(run(found, xs)[0], run(module, xs)[0], rtol=1e-5)
    # a matmul reads a whole column, not a row: no row-fused build
    assert row_fused(from_function(entry_function(heads_program()))) is None


def test_a_layernorm_searched_as_plain_ops_comes_out_as_one_kernel():
    """The search cannot enumerate an eleven-op block graph within a few
    seconds; the row-fused default build is a candidate beside its own."""
    module = layernorm_program()
    found = superoptimize(module, budget=6, jobs=1, cache_dir="none", log=None)
    names = [op.name for op in entry_function(found).body.ops][:-1]
    assert names == ["kernel.customized"]
    assert equivalent(module, found)


def test_the_row_fused_build_is_kept_when_the_search_left_no_time():
    """Verifying the default builds does not wait on the clock: a search
    whose deadline passed (a loaded machine) still ends on the one kernel."""
    import time

    from mirage_xdsl.search import cost_model
    from mirage_xdsl.search.budget import Stop
    from mirage_xdsl.search.options import SearchOptions
    from mirage_xdsl.search.ranking import pick
    from mirage_xdsl.search.report import Report
    from mirage_xdsl.search.ugraph import from_function

    module = layernorm_program()
    graph = from_function(entry_function(module))
    late = time.monotonic() - 1.0
    _, best = pick(
        module,
        graph,
        cost_model.cost(graph),
        [],
        SearchOptions(),
        None,
        Stop(),
        Report("layernorm"),
        late,
    )
    assert graph.kernels > 1 and best.kernels == 1


def unit_view_attention():
    """Attention whose softmax runs on scores viewed with an extra size-1 dim
    (``[2, 4, 32]`` as ``[2, 4, 1, 32]``) and viewed back before ``@ v``."""
    g = KernelGraph("attention")
    q, k, v = g.new_input((2, 4, 8)), g.new_input((2, 8, 32)), g.new_input((2, 32, 8))
    s = g.reshape(g.mul_scalar(g.matmul(q, k), 0.125), (2, 4, 1, 32))
    e = g.exp(g.add(s, g.neg(g.reduce_max(s, 3))))
    p = g.reshape(g.div(e, g.reduction(e, 3)), (2, 4, 32))
    g.mark_output(g.matmul(p, v))
    return g.module()


def test_reshapes_that_only_insert_unit_dims_do_not_cut_attention():
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.search.squeeze import inserted_dims, squeeze

    assert inserted_dims((2, 4, 32), (2, 4, 1, 32)) == (2,)
    assert inserted_dims((2, 4, 32), (2, 4, 32)) is None
    assert inserted_dims((2, 128), (2, 4, 32)) is None
    module = unit_view_attention()
    fn = entry_function(module).clone()
    assert len([p for p in partition(fn, 9) if isinstance(p, Segment)]) == 3
    assert squeeze(fn) == 2
    fn.verify()
    names = [op.name.split(".")[1] for op in fn.body.ops][:-1]
    assert "reshape" not in names and names.count("reduce_max") == 1
    assert not needs_partition(fn, 9)
    found = ModuleOp([fn])
    assert equivalent(module, found)
    xs = inputs(module)
    np.testing.assert_allclose(run(found, xs)[0], run(module, xs)[0], rtol=1e-5)


def test_a_unit_view_read_elsewhere_keeps_its_reshape():
    from mirage_xdsl.search.squeeze import squeeze

    g = KernelGraph("kept")
    x = g.new_input((2, 32))
    y = g.exp(g.reshape(x, (2, 1, 32)))
    g.mark_output(y)  # returned at the wider rank: nothing narrows it back
    g.mark_output(g.reshape(y, (2, 32)))
    fn = entry_function(g.module())
    assert squeeze(fn) == 0
    g = KernelGraph("over_unit")
    x = g.new_input((2, 32))
    s = g.reduction(g.reshape(x, (2, 32, 1)), 2)  # sums over the inserted dim
    g.mark_output(g.reshape(s, (2, 32)))
    assert squeeze(entry_function(g.module())) == 0


def test_a_unit_view_attention_is_searched_whole():
    module = unit_view_attention()
    log = io.StringIO()
    found = superoptimize(module, budget=5, jobs=1, cache_dir="none", log=log)
    lines = log.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("superoptimize @attention:")
    assert equivalent(module, found)


def test_the_row_fused_build_is_always_timed_beside_the_input():
    """With a measure deciding, the default builds are in the timed pool
    whatever the search found: a measure that favours one kernel picks it."""
    from mirage_xdsl.search.options import SearchOptions
    from mirage_xdsl.search.superoptimizer import superoptimize_function

    def measure(module):
        return float(len(list(entry_function(module).body.ops)))

    fn = entry_function(layernorm_program())
    options = SearchOptions(budget=3, jobs=1, max_kernels=1)
    outcome = superoptimize_function(fn, options, measure, cache_dir="none")
    timed = outcome.report.measured
    assert timed[0]["input"] and timed[0]["kernels"] == 11
    assert timed[1]["kernels"] == 1 and timed[1]["chosen"]
    assert outcome.report.kernels_after == 1


def test_the_segments_of_a_program_share_one_pool_of_workers(monkeypatch):
    """Each segment's search (and each stage's) runs its tasks on one forked
    pool made for the whole program, and finds what one process finds."""
    from mirage_xdsl.search import dispatch

    pools = []
    original = dispatch.Pool

    def counted(*args, **kwargs):
        pools.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(dispatch, "Pool", counted)
    module = heads_program()
    alone = superoptimize(module, budget=60, jobs=1, cache_dir="none", log=None)
    assert pools == []
    shared = superoptimize(module, budget=60, jobs=2, cache_dir="none", log=None)
    assert pools == [(2,)]
    assert module_text(shared) == module_text(alone)
