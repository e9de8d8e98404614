"""Saturating one layout's tensor classes, and counting what a round holds."""

from __future__ import annotations

import pytest

from mirage_xdsl.search import block_search
from mirage_xdsl.search.block_search import BlockSearch
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.superoptimizer import superoptimize_function
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.workloads import WORKLOADS


def _search(name: str, prune: bool):
    program = WORKLOADS[name].module(1, 8)
    options = SearchOptions(jobs=1, max_kernels=1, budget=120.0, prune=prune)
    return superoptimize_function(entry_function(program), options, cache_dir="none")


@pytest.mark.parametrize(
    ("name", "prune"), [("lora", True), ("norm_transformer", False)]
)
def test_counted_ops_of_a_round_are_the_ops_it_yields(monkeypatch, name, prune):
    """``count_specs`` groups classes by labels, phase and rank; every round
    of a real search, pruned and not, yields exactly the ops it counts."""
    monkeypatch.setattr(block_search, "MAX_CLASSES", 300)
    specs = BlockSearch._specs
    rounds = []

    def checked(self, new, count):
        listed = list(specs(self, new, count))
        assert self.count_specs(new, count) == len(listed)
        rounds.append((len(new), len(listed)))
        yield from listed

    monkeypatch.setattr(BlockSearch, "_specs", checked)
    _search(name, prune)
    # rounds with many new classes of several signatures were checked
    assert max(n for n, _ in rounds) > 50
    assert sum(ops for _, ops in rounds) > 10_000


def test_a_search_cut_short_counts_the_ops_left_in_its_round(monkeypatch):
    """An unpruned search that the class cap stops reports the untried ops of
    the round it was in; a pruned search that finishes reports none."""
    monkeypatch.setattr(block_search, "MAX_CLASSES", 300)
    cut = _search("norm_transformer", prune=False).report
    assert cut.unexplored > cut.explored
    monkeypatch.setattr(block_search, "MAX_CLASSES", 4000)
    whole = _search("rmsnorm_linear", prune=True).report
    assert whole.unexplored == 0 and whole.stopped == ""


def test_partial_sums_pass_only_the_linear_one_operand_ops():
    """The label rules let a partial sum through a one-operand element-wise op
    exactly when the op table calls it linear: scaling and negation, never
    exp or a shift by a constant."""
    from mirage_xdsl.ops import OPS, Form, kinds
    from mirage_xdsl.search import labels as L
    from mirage_xdsl.search import rules as R

    labels = (L.axis(0), L.axis(1))
    part = R.Tensor((4, 8), labels, None, partial=frozenset({L.axis(2)}))
    passed = {
        kind
        for kind in kinds(Form.UNARY, Form.SCALAR)
        if R.apply(R.Scope(), kind, [part], {"scalar": 0.5}) is not None
    }
    assert passed == {k for k in kinds(Form.UNARY, Form.SCALAR) if OPS[k].linear}
    assert passed == {"neg", "mul_scalar"}
