"""bf16 through the CUDA C backend: printed, compiled and emulated.

Each bf16 program (a matmul on the tensor-core path, an element-wise chain
with a row reduction, rms_norm, and the workloads with their tensors made
bf16) lowers to CUDA C that NVRTC compiles for sm_90 within the register and
shared-memory limits, and the SIMT emulator, which rounds every bf16 store to
nearest even as ``cvt.rn.bf16.f32`` does, matches the interpreter within bf16
precision. The emulator's rounding itself is checked bit by bit.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_cuda_compile import check_program, needs_nvrtc
from xdsl.dialects import test as xdsl_test
from xdsl.dialects.builtin import VectorType, bf16, f16
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import gpux
from mirage_xdsl.ir import builder as mi
from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import parse
from mirage_xdsl.lowering import nvrtc
from mirage_xdsl.lowering.cuda import generate_program, lowered
from mirage_xdsl.lowering.emulate import emulate
from mirage_xdsl.lowering.emulate_state import bf16_bits, bf16_values, round_bf16
from mirage_xdsl.semantics.interpreter import run
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS

BF16_TOLERANCE = 1e-2
"""Relative error allowed: bf16 keeps 8 significant bits (2^-8 ≈ 4e-3 per
rounding), and a program rounds at every bf16 tensor it writes."""


def bf16_matmul():
    """64x128 @ 128x64: K and N fit mma.m16n8k16, so tensor cores multiply."""
    g = new_kernel_graph("matmul_bf16")
    a = g.new_input((64, 128), mi.bfloat16)
    b = g.new_input((128, 64), mi.bfloat16)
    g.mark_output(g.matmul(a, b))
    return g.module()


def bf16_chain():
    """exp(silu(x) * y) / its row sums: element-wise ops and a reduction."""
    g = new_kernel_graph("chain_bf16")
    x = g.new_input((16, 256), mi.bfloat16)
    y = g.new_input((16, 256), mi.bfloat16)
    e = g.exp(g.mul(g.silu(x), y))
    g.mark_output(g.div(e, g.reduction(e, 1)))
    return g.module()


def bf16_rms_norm():
    g = new_kernel_graph("rms_norm_bf16")
    g.mark_output(g.rms_norm(g.new_input((8, 512), mi.bfloat16), 1e-6))
    return g.module()


PROGRAMS = {"matmul": bf16_matmul, "chain": bf16_chain, "rms_norm": bf16_rms_norm}


def as_bf16(module):
    """The same program with every f16 tensor made bf16."""
    text = re.sub(r"xf16\b", "xbf16", str(module))
    return parse(make_context(), text, "<bf16>")


def bf16_inputs(program, seed: int) -> list[np.ndarray]:
    """Inputs in [-0.5, 0.5] rounded to bf16, so the interpreter and the
    emulator start from the same values."""
    rng = np.random.default_rng(seed)
    return [
        round_bf16(rng.uniform(-0.5, 0.5, spec.shape).astype(np.float32))
        for spec in program.inputs()
    ]


def assert_bf16_emulation_matches(module, seed: int = 0) -> None:
    """Every output is written, holds bf16 values and is near the interpreter's."""
    xs = bf16_inputs(generate_program(module), seed)
    ref = run(module, xs)
    got = emulate(module, xs)
    assert len(got) == len(ref)
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        assert not np.isnan(g).any(), f"output {i}: an element was never written"
        assert np.array_equal(g, round_bf16(g)), f"output {i} is not bf16"
        err = np.linalg.norm(g - r) / np.linalg.norm(r)
        assert err < BF16_TOLERANCE, f"output {i} differs by {err}"


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_bf16_program_lowers_to_bf16_cuda(name: str) -> None:
    program = generate_program(PROGRAMS[name]())
    assert all(b.dtype == "bf16" for b in program.buffers)
    assert "mx_bf16* __restrict__ arg0" in program.source
    assert "__half* __restrict__" not in program.source
    if name == "matmul":
        assert "const mx_bf16x8" in program.source and "mx_mma(" in program.source


def test_bf16_matmul_uses_bf16_fragments() -> None:
    """The tensor-core path loads bf16 fragments; the GPU-level IR verifies."""
    module = lowered(bf16_matmul())
    module.verify()
    mmas = [op for op in module.walk() if isinstance(op, gpux.MmaOp)]
    assert mmas
    assert all(op.a.type == VectorType(bf16, [8]) for op in mmas)
    assert all(op.b.type == VectorType(bf16, [4]) for op in mmas)


def test_mma_refuses_mixed_fragments() -> None:
    """One mma instruction multiplies one operand type: f16 by bf16 is refused."""
    a, b, c = xdsl_test.TestOp(
        result_types=[VectorType(f16, [8]), VectorType(bf16, [4]), gpux.MMA_C]
    ).results
    with pytest.raises(VerifyException, match="vector<8xf16> and vector<4xf16>"):
        gpux.MmaOp(a, b, c).verify()


@needs_nvrtc
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_bf16_program_compiles(name: str) -> None:
    program = generate_program(PROGRAMS[name]())
    check_program(program)
    if name == "matmul":
        ptx = nvrtc.compile_cuda(program.source).ptx
        assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ptx


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_bf16_program_is_emulated_correctly(name: str) -> None:
    assert_bf16_emulation_matches(PROGRAMS[name](), seed=1)


def _bf16_workloads():
    for name in sorted(WORKLOADS):
        yield name, WORKLOADS[name].module
    for name, (_, build) in sorted(HANDWRITTEN.items()):
        yield name, build


@pytest.mark.parametrize(
    "name,build", list(_bf16_workloads()), ids=[n for n, _ in _bf16_workloads()]
)
def test_bf16_workload_is_emulated_correctly(name: str, build) -> None:
    """Every workload and hand-written µGraph (b = 1, dims / 8) as bf16."""
    assert_bf16_emulation_matches(as_bf16(build(1, 8)), seed=2)


@needs_nvrtc
@pytest.mark.parametrize("name", ["gqa_flashdecoding", "rmsnorm_linear_fused"])
def test_bf16_handwritten_compiles(name: str) -> None:
    check_program(generate_program(as_bf16(HANDWRITTEN[name][1](1))))


def test_f16_programs_get_no_bf16_prelude() -> None:
    """The bf16 prelude is only added where it is used: an f16 program's
    source is what it was before bf16 existed."""
    source = generate_program(HANDWRITTEN["rmsnorm_linear_fused"][1](1, 8)).source
    assert "mx_bf" not in source


def test_bf16_rounding_is_to_nearest_even() -> None:
    """float32 to bf16 as cvt.rn.bf16.f32: ties go to the even neighbour,
    overflow goes to infinity, NaN stays NaN, and widening back is exact."""
    one = 1.0
    ulp = 2.0**-7  # the spacing of bf16 values in [1, 2)
    x = np.array(
        [
            one,
            one + ulp / 2,  # tie, 1.0 is even: down
            one + 3 * ulp / 2,  # tie, 1 + 2 ulp is even: up
            one + ulp / 2 + 2.0**-20,  # just above the tie: up
            -(one + 3 * ulp / 2),  # ties round the magnitude, sign kept
            np.finfo(np.float32).max,  # past the largest bf16: infinity
            np.inf,
            np.nan,
            0.0,
            -0.0,
        ],
        np.float32,
    )
    bits = bf16_bits(x)
    assert bits.dtype == np.uint16
    assert [int(b) for b in bits[:9]] == [
        0x3F80,
        0x3F80,
        0x3F82,
        0x3F81,
        0xBF82,
        0x7F80,
        0x7F80,
        0x7FFF,
        0x0000,
    ]
    assert bits[9] == 0x8000
    values = bf16_values(bits)
    assert values.dtype == np.float32
    assert np.array_equal(
        values[:7], [1.0, 1.0, 1 + 2 * ulp, 1 + ulp, -1 - 2 * ulp, np.inf, np.inf]
    )
    assert np.isnan(values[7])
    assert np.array_equal(round_bf16(values), values, equal_nan=True)
