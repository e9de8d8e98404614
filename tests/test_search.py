"""The superoptimizer finds the known-good µGraph structures from plain programs.

Reduced shapes (``scale=8``) and one kernel deep keep each search to seconds;
``tools/bench_search.py`` runs the full shapes.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import func

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.search import superoptimize
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.superoptimizer import superoptimize_function
from mirage_xdsl.semantics.interpreter import entry_function, run
from mirage_xdsl.workloads import WORKLOADS, random_inputs

FAST = dict(jobs=1, max_kernels=1, budget=300.0)


def search(name: str, batch: int = 1, scale: int = 8, **options):
    program = WORKLOADS[name].module(batch, scale)
    options = {**FAST, **options}
    outcome = superoptimize_function(
        entry_function(program), SearchOptions(**options), cache_dir="none"
    )
    return program, outcome


def kernels(fn: func.FuncOp) -> list:
    return [op for op in fn.body.block.ops if not isinstance(op, func.ReturnOp)]


def block_kinds(op: kernel.CustomizedOp) -> list[str]:
    kinds = []
    for inner in op.entry.ops:
        if isinstance(inner, block.ThreadGraphOp):
            kinds += [t.name.split(".")[1] for t in inner.entry.ops][:-1]
        else:
            kinds.append(inner.name.split(".")[1])
    return kinds


def assert_same_function(program, outcome) -> None:
    from xdsl.dialects.builtin import ModuleOp

    found = ModuleOp([outcome.function.clone()])
    found.verify()
    xs = random_inputs(program, seed=7)
    for out, ref in zip(run(found, xs), run(program, xs), strict=True):
        assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-3


def only_customized(outcome) -> kernel.CustomizedOp:
    (op,) = kernels(outcome.function)
    assert isinstance(op, kernel.CustomizedOp)
    return op


def test_rmsnorm_fused_into_matmul() -> None:
    """One kernel. At this size (K = 512) each block loads its row and its
    weight strip whole (a for-loop of thin tiles would stream slower, by the
    cost model's tiles in flight), so the norm runs on the row inside the
    kernel, before the matmul."""
    program, outcome = search("rmsnorm_linear")
    op = only_customized(outcome)
    assert op.forloop == 1
    (norm,) = [o for o in op.entry.ops if isinstance(o, block.RmsNormOp)]
    (matmul,) = [o for o in op.entry.ops if isinstance(o, block.MatmulOp)]
    assert matmul.lhs == norm.result
    assert_same_function(program, outcome)


def test_gated_mlp_one_kernel() -> None:
    program, outcome = search("gated_mlp")
    op = only_customized(outcome)
    assert block_kinds(op).count("matmul") == 2
    assert "silu" in block_kinds(op)
    assert_same_function(program, outcome)


def test_lora_one_kernel() -> None:
    program, outcome = search("lora")
    only_customized(outcome)
    assert outcome.report.kernels_before == 4
    assert_same_function(program, outcome)


def test_gqa_forloop_accumulating_kernel() -> None:
    program, outcome = search("gqa")
    op = only_customized(outcome)
    assert op.forloop > 1
    kinds = block_kinds(op)
    assert "exp" in kinds and kinds.count("forloop_accum") == 2
    assert_same_function(program, outcome)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow)
        for n in ("norm_transformer", "qknorm_gqa")
    ],
)
def test_fewer_kernels(name: str) -> None:
    program, outcome = search(name)
    assert len(kernels(outcome.function)) < len(kernels(entry_function(program)))
    assert outcome.report.best_cost < outcome.report.input_cost
    assert_same_function(program, outcome)


def test_batch_eight() -> None:
    program, outcome = search("gated_mlp", batch=8)
    only_customized(outcome)
    assert_same_function(program, outcome)


TWO_KERNELS = """
func.func @f(%x: tensor<16x64xf16>, %y: tensor<16x64xf16>) -> tensor<16x64xf16> {
  %e = kernel.exp %x : tensor<16x64xf16> -> tensor<16x64xf16>
  %z = kernel.mul %e, %y : tensor<16x64xf16>, tensor<16x64xf16> -> tensor<16x64xf16>
  func.return %z : tensor<16x64xf16>
}
"""


def test_report_counts() -> None:
    """Two element-wise kernels fuse in a search of a second or so: the report
    counts each stage, and its summary line carries those counts."""
    from mirage_xdsl.ir.context import make_context
    from mirage_xdsl.ir.diagnostics import parse

    program = parse(make_context(), TWO_KERNELS, "two_kernels.mlir")
    outcome = superoptimize_function(
        entry_function(program), SearchOptions(**FAST), cache_dir="none"
    )
    r = outcome.report
    assert r.explored > r.pruned > 0
    assert r.screened >= r.verified >= 1 and r.verifier == "finite-field"
    assert (r.kernels_before, r.kernels_after) == (2, 1) and not r.cached
    assert r.best_cost < r.input_cost
    summary = r.summary()
    assert summary.startswith(
        f"superoptimize @f: {r.explored} graphs explored, "
        f"{r.pruned} pruned by abstract expression, "
    )
    assert f", {r.verified} verified (finite-field); kernels 2 -> 1; " in summary
    assert_same_function(program, outcome)


def test_result_independent_of_workers() -> None:
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.ir.printing import module_text

    texts = []
    for jobs in (1, 2):
        _, outcome = search("gated_mlp", jobs=jobs)
        texts.append(module_text(ModuleOp([outcome.function])))
    assert texts[0] == texts[1]


def test_python_api_returns_a_copy() -> None:
    program = WORKLOADS["rmsnorm_linear"].module(1, 8)
    out = superoptimize(program, cache_dir="none", log=None, **FAST)
    assert any(isinstance(op, kernel.CustomizedOp) for op in out.walk())
    assert not any(isinstance(op, kernel.CustomizedOp) for op in program.walk())


class FakeMeasure:
    """Times a module by its text length (deterministic, needs no GPU)."""

    key = "fake-device"

    def __init__(self) -> None:
        self.calls = 0
        self.last = 0.0
        self.prepared: list[str] = []
        self.timed: list[str] = []

    def prepare(self, modules) -> None:
        from mirage_xdsl.ir.printing import module_text

        assert self.calls == 0, "prepare comes before any timing"
        self.prepared += [module_text(m) for m in modules]

    def __call__(self, module) -> float:
        from mirage_xdsl.ir.printing import module_text

        self.timed.append(module_text(module))
        self.calls += 1
        self.last = len(module_text(module)) * 1e-9
        return self.last

    def describe(self) -> dict:
        return {"backend": "fake", "time_us": self.last * 1e6}


def test_measure_times_the_input_and_the_verified_and_keeps_the_fastest(
    tmp_path,
) -> None:
    program = WORKLOADS["rmsnorm_linear"].module(1, 8)

    def search_with(measure: FakeMeasure | None):
        return superoptimize_function(
            entry_function(program),
            SearchOptions(**FAST),
            measure=measure,
            cache_dir=str(tmp_path),
        )

    measure = FakeMeasure()
    report = search_with(measure).report
    assert measure.calls == len(report.measured) == 1 + report.verified
    # the input (and default builds) compiled ahead; the rest as they are timed
    assert measure.prepared == measure.timed[: len(measure.prepared)]
    assert 1 <= len(measure.prepared) < len(measure.timed)
    assert report.measured[0]["input"] and report.measured_by == "fake-device"
    chosen = [m for m in report.measured if m.get("chosen")]
    assert len(chosen) == 1
    assert chosen[0]["time_us"] == min(m["time_us"] for m in report.measured)
    assert all("cost_us" in m and "kernels" in m for m in report.measured)
    assert "timed" in report.summary()
    # cached under the measure's key: a second search with it measures nothing
    again = FakeMeasure()
    cached = search_with(again)
    assert cached.report.cached and again.calls == 0
    assert cached.report.measured == report.measured
    # the cost model's result is a different cache entry
    plain = search_with(None)
    assert not plain.report.cached and not plain.report.measured


def test_measure_option_of_the_pass() -> None:
    from mirage_xdsl.ir.diagnostics import MirageError
    from mirage_xdsl.passes.superoptimize import resolve_measure
    from mirage_xdsl.runtime.measure import gpu_available

    assert resolve_measure("none") is None
    with pytest.raises(MirageError, match="expected one of"):
        resolve_measure("fast")
    if not gpu_available():
        assert resolve_measure("auto") is None
        with pytest.raises(MirageError, match="measure=gpu needs a GPU"):
            resolve_measure("gpu")


def test_timed_pool_leads_with_each_kernel_count_and_keeps_size_variants() -> None:
    from mirage_xdsl.search.ranking import by_kernel_count
    from mirage_xdsl.search.report import Candidate
    from mirage_xdsl.search.ugraph import UGraph
    from mirage_xdsl.search.worker import size_variants

    def graph(kernels: int) -> UGraph:
        return UGraph("f", "f16", (), tuple(kernel_op() for _ in range(kernels)), ())

    def kernel_op():
        from mirage_xdsl.search.ugraph import KernelOp

        return KernelOp("exp", (0,))

    ranked = [Candidate(float(i), graph(1 if i < 5 else 2), True) for i in range(8)]
    order = [c.cost for c in by_kernel_count(ranked)]
    # the cheapest of each kernel count; no second, as each tiles alike
    assert order == [0.0, 5.0, 1.0, 2.0, 3.0, 4.0, 6.0, 7.0]

    def customized(cost: float, *grids) -> Candidate:
        from mirage_xdsl.search.ugraph import BlockGraph, BlockInput, KernelOp, Op

        ops = tuple(
            KernelOp(
                "customized",
                (0,),
                (),
                BlockGraph(
                    grid,
                    4,
                    (BlockInput(0, (0, -1, -1), 1),),
                    (Op("exp", (0,)),),
                    ((1, (0, -1, -1)),),
                ),
            )
            if grid
            else kernel_op()
            for grid in grids
        )
        return Candidate(cost, UGraph("f", "f16", ((64, 64),), ops, (1,)), True)

    # the second of a kernel count tiles the work otherwise than the first
    # (not its mirror image), and is made of customized kernels only: the
    # library op's pair ranked ahead of it is passed over
    split = [
        customized(0.0, (8, 64, 1), (8, 8, 4)),
        customized(1.0, (64, 8, 1), (8, 8, 4)),
        customized(2.0, None, (8, 8, 2)),
        customized(3.0, (8, 8, 32), (8, 8, 4)),
        customized(4.0, (4, 4, 4), (8, 8, 4)),
    ]
    assert [c.cost for c in by_kernel_count(split)] == [0.0, 3.0, 1.0, 2.0, 4.0]
    # the first of every kernel count before any second: the first two timed
    # cover two kernel counts
    counts = [
        customized(0.0, (8, 1, 1)),
        customized(1.0, (4, 1, 1)),
        customized(2.0, (8, 1, 1), (8, 1, 1)),
        customized(3.0, (2, 1, 1), (8, 1, 1)),
        customized(4.0, (8, 2, 1)),
    ]
    assert [c.cost for c in by_kernel_count(counts)] == [0.0, 2.0, 1.0, 3.0, 4.0]
    mixed = [Candidate(float(i), graph(2), True) for i in range(3)]
    mixed.append(customized(9.0, (2, 1, 1), (2, 1, 1)))
    assert [c.cost for c in by_kernel_count(mixed)] == [0.0, 9.0, 1.0, 2.0]

    _, found = search("rmsnorm_linear", max_kernels=1)
    sizes = {
        tuple((op.graph.grid, op.graph.forloop) for op in c.graph.ops if op.graph)
        for c in found.candidates
    }
    assert len(sizes) > 1  # other grids and for-loop ranges besides the cheapest
    assert size_variants([(1.0, found.candidates[0].graph)] * 3) == [
        (1.0, found.candidates[0].graph)
    ]


def test_timed_pool_has_one_of_each_kernel_and_every_kernel_count(
    monkeypatch,
) -> None:
    from mirage_xdsl.search import ranking
    from mirage_xdsl.search.budget import Stop
    from mirage_xdsl.search.options import SearchOptions
    from mirage_xdsl.search.report import Candidate, Report
    from mirage_xdsl.search.ugraph import BlockGraph, BlockInput, KernelOp, Op, UGraph

    def graph(grid, ops, kernels=1) -> UGraph:
        g = BlockGraph(
            grid, 4, (BlockInput(0, (0, -1, -1), 1),), ops, ((1, (0, -1, -1)),)
        )
        return UGraph(
            "f",
            "f16",
            ((64, 64),),
            (KernelOp("customized", (0,), (), g),) * kernels,
            (1,),
        )

    exp_sq = (Op("exp", (0,)), Op("square", (0,)))
    sq_exp = (Op("square", (0,)), Op("exp", (0,)))
    a = graph((4, 1, 1), exp_sq)
    same_as_a = graph((4, 1, 1), sq_exp)  # block ops in another order
    other_grid = graph((8, 1, 1), exp_sq)
    assert ranking.shape_key(a) == ranking.shape_key(same_as_a)
    assert ranking.shape_key(a) != ranking.shape_key(other_grid)
    ranked = [
        Candidate(1.0, a, True),
        Candidate(2.0, same_as_a, True),
        Candidate(3.0, other_grid, True),
    ] + [Candidate(4.0 + i, graph((2**i, 1, 1), exp_sq, 2), True) for i in range(3)]
    assert [c.cost for c in ranking.distinct(ranked)] == [1.0, 3.0, 4.0, 5.0, 6.0]

    # measured selection times the cheapest two of each kernel count, even when
    # the cost model ranks every two-kernel candidate behind the one-kernel
    # ones, and what the model puts above the input but within MEASURED_SLACK
    monkeypatch.setattr(
        ranking,
        "verified",
        lambda program, ranked, want, options, report, deadline=0: ranked[:want],
    )
    asked: list[int] = []

    def verifying(program, ranked, want, options, report, deadline):
        for c in ranked[:want]:
            asked.append(c.graph.kernels)
            yield c

    monkeypatch.setattr(ranking, "verifying", verifying)
    timed: list[UGraph] = []
    always_timed: list[UGraph] = []

    def measured_pick(pool, measure, report, deadline, always, baselines, more):
        # only the lead is verified before timing starts
        assert len(asked) == ranking.ALWAYS_TIMED
        timed.extend(g for _, g in pool)
        timed.extend(g for _, g in more)
        always_timed.extend(g for _, g in pool[:always])
        return pool[0]

    monkeypatch.setattr(ranking, "measured_pick", measured_pick)
    ranked += [
        Candidate(150.0, graph((4, 1, 1), exp_sq, 3), True),
        Candidate(250.0, graph((4, 1, 1), exp_sq, 4), True),
    ]
    options = SearchOptions(verify_top=1, measure_top=6)
    ranking.pick(None, a, 100.0, ranked, options, lambda m: 1.0, Stop(), Report("f"))
    # the cheapest of each kernel count first
    assert [g.kernels for g in timed] == [1, 1, 2, 3, 1, 2, 2]
    # the input and the search's cheapest candidates of the two cheapest
    # kernel counts are timed past any deadline
    assert always_timed == [a, a, ranked[3].graph]
    timed.clear()  # the cost model alone keeps to what it costs below the input
    ranking.pick(None, a, 100.0, ranked, options, None, Stop(), Report("f"))
    assert timed == []


def test_parallel_verification_gives_the_serial_answer(monkeypatch) -> None:
    from mirage_xdsl.search import screening

    serial = search("gated_mlp", jobs=1)[1].report
    monkeypatch.setattr(screening, "PARALLEL_VERDICT_SECONDS", 0.0)
    pools = []
    make_pool = screening.verifier_pool
    monkeypatch.setattr(
        screening, "verifier_pool", lambda n: pools.append(n) or make_pool(n)
    )
    parallel = search("gated_mlp", jobs=2)[1].report
    assert pools == [2]
    assert parallel.verified == serial.verified
    assert parallel.best_cost == serial.best_cost
    assert parallel.kernels_after == serial.kernels_after


def test_scaled_attention_fuses_its_scale() -> None:
    """softmax((Q·K) * 0.125)·V becomes one customized kernel that applies the
    scale in-kernel, with the target's constant (the search takes constants
    from the program; it cannot invent them)."""
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.dialects import tensor_ops as t
    from mirage_xdsl.ir.builder import new_kernel_graph
    from mirage_xdsl.verify import equivalent

    g = new_kernel_graph("scaled")
    q, k, v = (
        g.new_input((2, 16, 16)),
        g.new_input((2, 16, 64)),
        g.new_input((2, 64, 16)),
    )
    e = g.exp(g.mul_scalar(g.matmul(q, k), 0.125))
    g.mark_output(g.matmul(g.div(e, g.reduction(e, 2)), v))
    program = g.module()
    outcome = superoptimize_function(
        entry_function(program), SearchOptions(**FAST), cache_dir="none"
    )
    op = only_customized(outcome)
    scales = [o for o in op.walk() if isinstance(o, t.ScalarOp)]
    assert [(s.KIND, s.value) for s in scales] == [("mul_scalar", 0.125)]
    assert_same_function(program, outcome)
    assert equivalent(program, ModuleOp([outcome.function.clone()])).equivalent


@pytest.mark.parametrize("kind", ["relu", "gelu"])
def test_activation_fused_after_matmul(kind: str) -> None:
    """act(X·W), two kernels, becomes one customized kernel that applies the
    activation to the block matmul's tile; the verifier proves it."""
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.ir.builder import new_kernel_graph
    from mirage_xdsl.verify.equivalence import equivalent

    g = new_kernel_graph(f"{kind}_linear")
    x, w = g.new_input((8, 64)), g.new_input((64, 64))
    g.mark_output(getattr(g, kind)(g.matmul(x, w)))
    program = g.module()
    outcome = superoptimize_function(
        entry_function(program), SearchOptions(**FAST), cache_dir="none"
    )
    op = only_customized(outcome)
    assert "matmul" in block_kinds(op) and kind in block_kinds(op)
    assert_same_function(program, outcome)
    found = ModuleOp([outcome.function.clone()])
    assert equivalent(program, found).equivalent


def test_safe_softmax_becomes_one_kernel() -> None:
    """exp(x - max(x)) / sum(...) over rows of 64 x 512, six library kernels,
    becomes one customized kernel: the block graph takes each row's maximum
    on its tile (the grid splits only the rows; a maximum needs its row
    whole), and the verifier proves the result equal to the input program."""
    from softmax_program import softmax_module
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.verify import equivalent

    program = softmax_module((64, 512))
    outcome = superoptimize_function(
        entry_function(program), SearchOptions(**FAST), cache_dir="none"
    )
    assert outcome.report.kernels_before == 6
    op = only_customized(outcome)
    assert "reduce_max" in block_kinds(op) and "exp" in block_kinds(op)
    (tile,) = [o for o in op.walk() if isinstance(o, block.InputOp)]
    assert tile.input_map[0] == 0 and 1 not in tile.input_map
    assert tile.forloop_dim == -1
    assert_same_function(program, outcome)
    found = ModuleOp([outcome.function.clone()])
    assert equivalent(program, found).equivalent


def test_safe_attention_fuses_its_softmax() -> None:
    """Q·K, the row maximum of the scores subtracted, exp, sum, div, ·V:
    eight library ops become one customized kernel, proved equal to the plain
    attention as well as to its input. Its blocks own whole score rows, or
    walk them with the online softmax: a for-loop over the keys whose
    accumulations are weighted by each iteration's row maximum (a maximum
    is never added up over iterations)."""
    from softmax_program import attention_module
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.verify import equivalent

    program = attention_module(2, 16, 64, 16)
    outcome = superoptimize_function(
        entry_function(program), SearchOptions(**FAST), cache_dir="none"
    )
    assert outcome.report.kernels_before == 8
    op = only_customized(outcome)
    assert block_kinds(op).count("matmul") == 2 and "reduce_max" in block_kinds(op)
    accums = [o for o in op.walk() if isinstance(o, block.ForloopAccumOp)]
    assert op.forloop == 1 or (accums and all(a.shift is not None for a in accums))
    assert_same_function(program, outcome)
    found = ModuleOp([outcome.function.clone()])
    assert equivalent(program, found).equivalent
    assert equivalent(attention_module(2, 16, 64, 16, safe=False), found).equivalent


def _blas_threads_after_limit() -> list[int]:
    from threadpoolctl import threadpool_info

    from mirage_xdsl.search.pool import one_blas_thread

    one_blas_thread()
    return [lib["num_threads"] for lib in threadpool_info()]


def test_search_workers_keep_numpy_to_one_thread() -> None:
    """One worker per core, each with one BLAS thread: not a core's worth each."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as pool:
        threads = pool.apply(_blas_threads_after_limit)
    assert threads and all(n == 1 for n in threads)


def test_split_k_combine_finishes_the_norm_alongside_the_parts() -> None:
    """RMSNorm + linear at a shape of no workload: the search builds split-K.
    Its first kernel splits both the columns and the contraction, so the
    parts are stacked along the rows (the columns are stitched); its
    combining kernel walks X's row in step with the parts and finishes the
    RMS there, one slice per part."""
    from mirage_xdsl.search.ugraph import to_module

    program = WORKLOADS["rmsnorm_linear"].module(2, 8)  # X[4, 512], W[512, 512]
    found = superoptimize_function(
        entry_function(program),
        SearchOptions(**{**FAST, "max_kernels": 2}),
        measure=FakeMeasure(),
        cache_dir="none",
    )

    def split_k(graph) -> bool:
        if graph.kernels != 2 or any(op.graph is None for op in graph.ops):
            return False
        first, combine = (op.graph for op in graph.ops)
        split = [d for d in range(3) if first.grid[d] > 1]
        x = graph.ops[1].operands.index(0)
        return (
            len(split) == 2  # columns and contraction
            and all(omap[d] != -1 for _, omap in first.outputs for d in split)
            and any(i.source == x and i.fmap == 1 for i in combine.inputs)
        )

    graphs = [c.graph for c in found.candidates if split_k(c.graph)]
    assert graphs
    module = to_module(graphs[0])
    module.verify()
    xs = random_inputs(program, seed=3)
    for out, ref in zip(run(module, xs), run(program, xs), strict=True):
        assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-3


def test_a_search_its_budget_stopped_answers_one_given_its_guaranteed_share(
    tmp_path,
) -> None:
    """A segment searched again with its earlier segments served from the
    cache gets more time than it had; the cached result still answers it
    where it was guaranteed the same share (``served_by``), and only then.
    The entry is a complete search's, marked as stopped by the budget, so no
    timing decides it."""
    import json

    program = WORKLOADS["rmsnorm_linear"].module(1, 8)

    def search_with(budget: float, served_by: float | None = None):
        options = SearchOptions(jobs=1, max_kernels=1, budget=budget)
        return superoptimize_function(
            entry_function(program), options, None, str(tmp_path), None, served_by
        ).report

    assert not search_with(300.0).cached
    (path,) = tmp_path.glob("*.json")

    def stopped(budget: float, guaranteed: float | None = None) -> None:
        entry = json.loads(path.read_text())
        entry.pop("guaranteed", None)
        entry["budget"] = budget
        if guaranteed is not None:
            entry["guaranteed"] = guaranteed
        path.write_text(json.dumps(entry))

    stopped(5.0)
    assert search_with(5.0).cached and not search_with(6.0, served_by=6.0).cached
    stopped(5.0, guaranteed=6.0)  # had 5 of a guaranteed 6
    assert search_with(9.0, served_by=6.0).cached
    assert not search_with(9.0, served_by=7.0).cached  # guaranteed more now


def test_a_starved_search_is_cached_with_its_guaranteed_share(tmp_path) -> None:
    """A search stopped by its budget is cached with the share it was
    guaranteed even where it had half of it (an earlier segment overran):
    a rerun with the same budget serves it, whatever time the rerun leaves
    it."""
    import json

    program = WORKLOADS["rmsnorm_linear"].module(1, 1)
    options = SearchOptions(jobs=1, max_kernels=1, budget=0.5)
    report = superoptimize_function(
        entry_function(program), options, None, str(tmp_path), None, 1.0
    ).report
    if report.stopped != "budget":
        pytest.skip("the search finished within its budget")
    (path,) = tmp_path.glob("*.json")
    assert json.loads(path.read_text())["guaranteed"] == 1.0
    rerun = SearchOptions(jobs=1, max_kernels=1, budget=5.0)
    assert superoptimize_function(
        entry_function(program), rerun, None, str(tmp_path), None, 1.0
    ).report.cached
