"""The cost bound across kernel depths (``search/bound.py``).

It must never change what the cost model would pick: every kernel costs at
least :func:`kernel_floor`, and every complete µGraph under the limit that
the unbounded search finds, the bounded search finds too.
"""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.search import cost_model, ranking
from mirage_xdsl.search.bound import kernel_floor
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.superoptimizer import superoptimize_function
from mirage_xdsl.search.ugraph import from_function
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.workloads import WORKLOADS

TWO_DEEP = dict(max_kernels=2, budget=300.0, jobs=2)


def _search(name: str, scale: int, measure=None, **options):
    fn = entry_function(WORKLOADS[name].module(1, scale))
    options = SearchOptions(**{**TWO_DEEP, **options})
    return superoptimize_function(fn, options, measure, cache_dir="none")


def _model_time(module: ModuleOp) -> float:
    """A device stand-in that agrees with the cost model."""
    fn = next(iter(module.ops))
    return cost_model.cost(from_function(fn))  # type: ignore[arg-type]


def _text(outcome) -> str:
    return module_text(ModuleOp([outcome.function.clone()]))


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_kernel_costs_at_least_the_floor(name: str) -> None:
    for scale in (1, 8):
        ug = from_function(entry_function(WORKLOADS[name].module(1, scale)))
        assert all(k.seconds >= kernel_floor() for k in cost_model.kernel_costs(ug))


@pytest.mark.slow
def test_bound_keeps_the_cost_models_answer_and_skips_what_cannot_win() -> None:
    bounded = _search("gated_mlp", 16)
    unbounded = _search("gated_mlp", 16, bound=False)
    assert _text(bounded) == _text(unbounded)
    assert bounded.report.best_cost == unbounded.report.best_cost
    # two kernels cost at least twice the floor, above the one-kernel best
    assert bounded.report.best_cost < 2 * kernel_floor()
    assert len(bounded.report.tasks) == 1 and bounded.report.bounded > 0
    assert len(unbounded.report.tasks) == 2 and unbounded.report.bounded == 0
    assert all(c.graph.kernels == 1 for c in bounded.candidates)
    for c in unbounded.candidates:
        assert c.graph.kernels == 1 or c.cost >= 2 * kernel_floor()


@pytest.mark.slow
def test_costed_prefixes_lose_no_candidate_under_the_limit(monkeypatch) -> None:
    """With a measure the limit is the slack times the best, above two
    kernels' floor, so each prefix is costed (by the worker running its
    first task); the tasks of some are skipped, and every candidate under
    the limit that the unbounded search finds is still found. (A slack of
    1.3 puts the limit between the cheapest prefixes and the dearest at this
    size.)"""
    monkeypatch.setattr(ranking, "MEASURED_SLACK", 1.3)
    bounded = _search("gqa", 8, _model_time)
    unbounded = _search("gqa", 8, _model_time, bound=False)
    limit = 1.3 * min(c.cost for c in unbounded.candidates if c.screened)
    assert limit > 2 * kernel_floor()
    assert bounded.report.skipped > unbounded.report.skipped
    kept = {repr(c.graph) for c in bounded.candidates}
    under = {repr(c.graph) for c in unbounded.candidates if c.cost < limit}
    assert under <= kept
    assert _text(bounded) == _text(unbounded)


def test_last_kernel_must_see_every_argument_the_outputs_need() -> None:
    """One kernel deep, the only kernels that can finish gqa read Q, K and V
    (or tensors made from all three): the others are not searched."""
    from mirage_xdsl.search.block_layout import Layout
    from mirage_xdsl.search.generator import Generator
    from mirage_xdsl.search.task import Prefix

    fn = entry_function(WORKLOADS["gqa"].module(1, 8))
    gen = Generator(fn, SearchOptions())
    every = gen.items(Prefix())
    last = gen.items(Prefix(), final=True)
    assert set(last) < set(every)
    for item in set(every) - set(last):
        sources = item.sources if isinstance(item, Layout) else item.operands
        assert set(sources) != {0, 1, 2}
    assert all(set(i.sources) == {0, 1, 2} for i in last if isinstance(i, Layout))
