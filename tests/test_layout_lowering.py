"""Layout ops in both GPU backends: ``kernel.transpose`` becomes a kernel of
its own (``block.transpose`` inside any kernel), ``kernel.reshape`` an alias of
its operand's buffer, with no kernel.

Each program of ``tests/layout_program.py`` runs through the CUDA C lowering
on the emulator and through Triton's interpreter, against our interpreter, and
compiles for sm_90 in both backends (NVRTC; Triton's own compiler).
"""

from __future__ import annotations

import numpy as np
import pytest
from layout_program import PROGRAMS, reshaped_input, returned_reshape
from test_cuda_compile import check_program, needs_nvrtc
from test_lowering import assert_emulation_matches
from test_triton import _check_compiled, _compile_all_forms, _failures, _interpret

from mirage_xdsl.dialects import kernel
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.lowering.cuda import generate_program
from mirage_xdsl.lowering.default_customize import DefaultCustomizePass
from mirage_xdsl.lowering.triton import generate_triton
from mirage_xdsl.semantics.interpreter import run
from mirage_xdsl.workloads import random_inputs

NAMES = sorted(PROGRAMS)


@pytest.mark.parametrize("name", NAMES)
def test_emulated_cuda_matches_interpreter(name: str) -> None:
    assert_emulation_matches(PROGRAMS[name](), seed=7)


@needs_nvrtc
@pytest.mark.parametrize("name", NAMES)
def test_cuda_compiles(name: str) -> None:
    check_program(generate_program(PROGRAMS[name]()))


def test_interpreted_triton_matches_interpreter() -> None:
    rows = _interpret("layout", "0")
    assert {r["case"] for r in rows} == {f"layout {n}" for n in NAMES}
    assert not _failures(rows)


@pytest.mark.parametrize("name", NAMES)
def test_triton_compiles_to_cubin(name: str) -> None:
    for compiled in _compile_all_forms(PROGRAMS[name]()):
        _check_compiled(compiled)


def test_default_customize_keeps_reshapes_and_customizes_transposes() -> None:
    module = PROGRAMS["heads"]()
    xs = random_inputs(module, 1, -0.5, 0.5)
    want = run(module, xs)
    DefaultCustomizePass().apply(make_context(), module)
    module.verify()
    names = [op.name for op in module.body.block.first_op.body.block.ops]
    assert names.count("kernel.reshape") == 2 and names.count("kernel.customized") == 3
    (transpose,) = [
        op
        for op in module.walk()
        if isinstance(op, kernel.CustomizedOp)
        and any(inner.name == "block.transpose" for inner in op.entry.ops)
    ]
    assert [inner.name for inner in transpose.entry.ops] == [
        "block.input",
        "block.transpose",
        "block.output",
    ]
    (got,) = run(module, xs)
    # The customized matmul sums its products in another order: fp32 rounding
    # (values reach about 40 after exp, so relative, not absolute).
    np.testing.assert_allclose(got, want[0], rtol=1e-5, atol=0)


def test_a_reshape_is_no_launch_in_either_backend() -> None:
    """The reshapes of the input name its buffer; the kernel whose result is
    returned reshaped writes the output, which the reduction then reads."""
    cuda = generate_program(returned_reshape())
    triton = generate_triton(returned_reshape())
    for buffers, args in (
        (cuda.buffers, [x.args for x in cuda.launches]),
        (triton.buffers, [k.args for k in triton.kernels]),
    ):
        assert [b.name for b in buffers] == ["input0", "output0", "output1"]
        assert args == [("input0", "output0"), ("output0", "output1")]


@pytest.mark.parametrize("backend", [generate_program, generate_triton])
def test_returning_a_reshape_of_an_input_is_one_line(backend) -> None:
    with pytest.raises(MirageError) as e:
        backend(reshaped_input())
    message = str(e.value)
    assert "@view returns a reshape of an input" in message
    assert "\n" not in message


@pytest.mark.parametrize("customized", [False, True])
def test_layout_ops_read_back_as_a_ugraph_and_are_costed(customized: bool) -> None:
    """A function with layout ops (as the search stitches them between its
    segments) reads back as a µGraph that rebuilds to the same function; a
    reshape costs nothing, a transpose a kernel."""
    from mirage_xdsl.search.cost_model import kernel_costs
    from mirage_xdsl.search.ugraph import from_function, to_module

    module = PROGRAMS["heads"]()
    if customized:
        DefaultCustomizePass().apply(make_context(), module)
    ug = from_function(module.body.block.first_op)
    kinds = [op.kind for op in ug.ops]
    assert kinds.count("reshape") == 2
    assert ("shape", (1, 64, 4, 64)) in ug.ops[2].attrs
    costs = kernel_costs(ug)
    assert [costs[i].seconds for i, k in enumerate(kinds) if k == "reshape"] == [0, 0]
    assert all(costs[i].seconds > 0 for i, k in enumerate(kinds) if k != "reshape")
    xs = random_inputs(module, 2, -0.5, 0.5)
    (want,) = run(module, xs)
    (got,) = run(to_module(ug), xs)
    assert abs(got - want).max() == 0
