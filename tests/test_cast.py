"""``kernel.cast``: f16, bf16 and f32 storage of the same values.

Kernels compute in fp32 whatever their tensors hold, so a cast only changes
how a value is stored: the interpreter and the finite field take it as the
identity (so the verifier proves programs that differ only in where they
cast equal, and still refutes wrong arithmetic), and the lowering is a copy
whose ``block.output`` stores the result's element type. Checked through
both backends (Triton's CPU interpreter and sm_90 compile, the CUDA C
emulator and NVRTC) and the search, which keeps casts between segments.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from backend_checks import BackendChecks, parse_program

from mirage_xdsl.ir.builder import bfloat16, float16, float32, new_kernel_graph
from mirage_xdsl.search import superoptimize
from mirage_xdsl.semantics.interpreter import run
from mirage_xdsl.verify.equivalence import equivalent

CAST = Path(__file__).parent / "filecheck" / "inputs" / "cast.mlir"


def norm(where: str, scale: float = 1.0):
    """RMSNorm of a bf16 ``x`` in fp32, cast back to bf16 ``where``."""
    g = new_kernel_graph()
    x = g.new_input((4, 96), bfloat16)
    if where == "before":
        y = g.cast(g.rms_norm(g.cast(x, float32)), bfloat16)
    else:
        y = g.rms_norm(x)
    g.mark_output(g.mul_scalar(y, scale))
    return g.module()


def module_of_file():
    return parse_program(CAST)


def test_builder_casts_between_float_types() -> None:
    g = new_kernel_graph()
    x = g.new_input((4, 8), float16)
    y = g.cast(g.cast(x, float32), bfloat16)
    assert y.type.element_type == bfloat16 and y.type.get_shape() == (4, 8)


def test_interpreter_takes_a_cast_as_the_identity() -> None:
    x = np.linspace(0.5, 2.0, 4 * 96, dtype=np.float32).reshape(4, 96)
    w = np.linspace(1.0, 3.0, 96, dtype=np.float32)
    b, f = run(module_of_file(), [x, w])
    n = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(b, n, rtol=1e-5)
    np.testing.assert_allclose(f, np.exp(n), rtol=1e-5)


def test_verifier_proves_casts_moved_and_refutes_a_wrong_scale() -> None:
    assert equivalent(norm("before"), norm("none"))
    assert not equivalent(norm("before"), norm("none", 2.0))


class TestBackends(BackendChecks):
    PROGRAMS = (CAST,)


def test_search_keeps_casts_between_segments() -> None:
    program = module_of_file()
    out = superoptimize(program, budget=20.0, jobs=1, cache_dir="none", log=None)
    assert str(out).count("kernel.cast") == 4
    assert equivalent(program, out)
