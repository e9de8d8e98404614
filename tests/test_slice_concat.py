"""``kernel.slice`` and ``kernel.concat``: rotary embedding's
``rotate_half`` (``cat(-x[..., d/2:], x[..., :d/2])``) and a fused
projection split into its parts.

Checked at every layer on the same programs: the builder and the shape rules,
the interpreter against numpy, the finite-field verifier (proves a reordered
rotation, refutes a wrong sign), the default lowering through both backends
(a slice becomes a ``block.input`` reading its window in place, a concat a
``block.concat``; Triton under its CPU interpreter and compiled for sm_90,
CUDA C under the SIMT emulator and NVRTC) and the search, which fuses the
row-local rotation into one kernel (``test_row_layouts.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from backend_checks import BackendChecks, parse_program

from mirage_xdsl.dialects import shapes
from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.search import superoptimize
from mirage_xdsl.search.ugraph import from_function, to_module
from mirage_xdsl.semantics.interpreter import entry_function, run
from mirage_xdsl.verify.equivalence import equivalent

INPUTS = Path(__file__).parent / "filecheck" / "inputs"
FILES = ["rotate_half", "slice_unaligned"]


def rope(form: str):
    """``x * cos + rotate_half(x) * sin`` with the rotation written ``form``."""
    g = new_kernel_graph()
    x = g.new_input((1, 8, 4, 64))
    cos, sin = g.new_input((8, 1, 64)), g.new_input((8, 1, 64))
    lo, hi = g.split(x, [32, 32], 3)
    rotated = {
        "plain": lambda: g.concat(g.neg(hi), lo, 3),
        "negated": lambda: g.mul_scalar(g.concat(hi, g.neg(lo), 3), -1.0),
        "wrong": lambda: g.concat(hi, g.neg(lo), 3),
    }[form]()
    g.mark_output(g.add(g.mul(x, cos), g.mul(rotated, sin)))
    return g.module()


def module_of(name: str):
    return parse_program(INPUTS / f"{name}.mlir")


def test_shape_rules() -> None:
    assert shapes.slice_((2, 8, 64), 2, 32, 64) == (2, 8, 32)
    with pytest.raises(shapes.ShapeError, match=r"slice \[8, 8\) of dim 1"):
        shapes.slice_((2, 8, 64), 1, 8, 8)
    with pytest.raises(shapes.ShapeError, match="slice dim 3 out of range"):
        shapes.slice_((2, 8, 64), 3, 0, 1)
    g = new_kernel_graph()
    qkv = g.new_input((1, 16, 96))
    q, k, v = g.split(qkv, [32, 32, 32], 2)
    assert [p.type.get_shape() for p in (q, k, v)] == [(1, 16, 32)] * 3
    with pytest.raises(shapes.ShapeError, match="do not add up"):
        g.split(qkv, [32, 32], 2)
    with pytest.raises(shapes.ShapeError, match="concat operands differ"):
        g.concat(q, g.new_input((1, 8, 32)), 2)


def test_interpreter_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    x, c, s = (
        rng.standard_normal(shape).astype(np.float32)
        for shape in [(1, 8, 4, 64), (8, 1, 64), (8, 1, 64)]
    )
    (got,) = run(rope("plain"), [x, c, s])
    rotated = np.concatenate([-x[..., 32:], x[..., :32]], -1)
    np.testing.assert_array_equal(got, x * c + rotated * s)


def test_verifier_proves_a_reordered_rotation_and_refutes_a_wrong_sign() -> None:
    assert equivalent(rope("plain"), rope("negated"))
    assert not equivalent(rope("plain"), rope("wrong"))


def test_a_slice_reads_its_window_through_the_search_graph() -> None:
    """A default-customized slice round-trips through the search's µGraph
    form with its window."""
    from xdsl.context import Context

    from mirage_xdsl.lowering.default_customize import DefaultCustomizePass

    module = module_of("slice_unaligned")
    DefaultCustomizePass().apply(Context(), module)
    text = str(module)
    assert "window [2, 3, 43]" in text and "window [1, 2, 5]" in text
    back = to_module(from_function(entry_function(module)))
    assert equivalent(module, back)
    assert equivalent(module, module_of("slice_unaligned"))


class TestBackends(BackendChecks):
    PROGRAMS = tuple(INPUTS / f"{name}.mlir" for name in FILES)


def test_search_fuses_the_rotation_into_one_kernel() -> None:
    program = rope("plain")
    out = superoptimize(program, budget=20.0, jobs=1, cache_dir="none", log=None)
    text = str(out)
    assert "kernel.slice" not in text and "kernel.concat" not in text
    assert text.count("kernel.customized") == 1
    assert equivalent(program, out)
