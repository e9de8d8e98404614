"""A GPU times a segment behind the program-input transposes in front of it
(``search/prologue.py``), as the lowering will fold them."""

from __future__ import annotations

import numpy as np
import pytest

from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.search import superoptimize
from mirage_xdsl.search.partition import Segment, partition
from mirage_xdsl.search.prologue import (
    ProloguedMeasure,
    prologue_of,
    restricted,
    with_prologue,
)
from mirage_xdsl.semantics.interpreter import entry_function, run


def scores_program():
    """``exp(q @ k^T)`` with ``k`` a program input: the transpose is kept in
    front of the segment."""
    g = new_kernel_graph("scores")
    q, k = g.new_input((4, 16)), g.new_input((32, 16))
    g.mark_output(g.exp(g.matmul(q, g.transpose(k, 0, 1))))
    return g.module()


def test_a_segment_fed_by_an_input_transpose_runs_the_same_behind_it():
    fn = entry_function(scores_program())
    (segment,) = [p for p in partition(fn, 9) if isinstance(p, Segment)]
    prologue = prologue_of(segment.inputs)
    assert prologue is not None and [i for i, _, _ in prologue.transposes] == [1]
    from xdsl.dialects.builtin import ModuleOp

    alone = ModuleOp([segment.function.clone()])
    behind = with_prologue(alone, prologue)
    assert "kernel.transpose" in module_text(behind)
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((4, 16)), rng.standard_normal((32, 16))
    (want,) = run(alone, [q, k.T.copy()])
    (got,) = run(behind, [q, k])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # a stage reading the segment's argument 1 gets it as its own argument 0
    arg = segment.function.body.block.args[1]
    assert restricted(prologue, [arg]).transposes[0][0] == 0
    assert restricted(prologue, [segment.function.body.block.args[0]]) is None


class Recording:
    """A measure that times by text length and keeps what it was given."""

    key = "fake"

    def __init__(self) -> None:
        self.timed: list[str] = []

    def __call__(self, module) -> float:
        text = module_text(module)
        self.timed.append(text)
        return len(text) * 1e-9


def test_the_segments_candidates_are_timed_behind_the_transpose():
    measure = Recording()
    superoptimize(
        scores_program(),
        budget=5,
        jobs=1,
        cache_dir="none",
        log=None,
        measure=measure,
        max_kernels=1,
    )
    assert measure.timed
    for text in measure.timed:  # the input and every candidate
        assert "kernel.transpose" in text and "%1: tensor<32x16x" in text.split(")")[0]


def test_the_key_names_the_prologue():
    fn = entry_function(scores_program())
    (segment,) = [p for p in partition(fn, 9) if isinstance(p, Segment)]
    wrapped = ProloguedMeasure(Recording(), prologue_of(segment.inputs))
    assert wrapped.key == "fake:transposed-inputs[1:0-1]"
    with pytest.raises(AttributeError):
        wrapped.describe  # noqa: B018 (the wrapped measure has none)


def test_what_prepare_compiled_is_what_is_timed():
    """The measure gets the same prologued module in ``prepare`` and when it
    times it, so a compile ahead is not wasted."""
    fn = entry_function(scores_program())
    (segment,) = [p for p in partition(fn, 9) if isinstance(p, Segment)]
    seen: list[object] = []

    class Inner(Recording):
        def prepare(self, modules):
            seen.extend(modules)

        def __call__(self, module):
            seen.append(module)
            return 1.0

    from xdsl.dialects.builtin import ModuleOp

    wrapped = ProloguedMeasure(Inner(), prologue_of(segment.inputs))
    module = ModuleOp([segment.function.clone()])
    wrapped.prepare([module])
    wrapped(module)
    assert len(seen) == 2 and seen[0] is seen[1]
