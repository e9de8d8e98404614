"""Every element-wise entry of the op table works through every layer.

The tests are parametrised by the table itself, so a new entry is tested
everywhere the moment it is added: its op classes at each level, the
interpreter against the entry's numpy meaning, the finite-field verifier, the
abstract expressions, the label rules and the cost, the fuzzer, both code
generators (the CUDA C through its emulator, the Triton through Triton's CPU
interpreter, both through to a cubin), and the torch front end for its ATen
names.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from op_program import CONSTANT, KINDS, op_inputs, op_module

from mirage_xdsl.dialects import block, kernel, thread
from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.ops import MATH, OPS, Form, elementwise_kinds, kinds
from mirage_xdsl.semantics.interpreter import run

DIALECTS = {
    "kernel": kernel.Kernel,
    "block": block.BlockDialect,
    "thread": thread.Thread,
}


def _real(kind: str, x: np.ndarray, row: np.ndarray) -> np.ndarray:
    spec = OPS[kind]
    assert spec.real is not None
    if spec.form is Form.SCALAR:
        return spec.real(x, np.float32(CONSTANT))
    if spec.form is Form.BINARY:
        return spec.real(x, row)
    return spec.real(x)


def test_the_table_is_consistent() -> None:
    """Each element-wise entry says everything the layers read; every name its
    GPU forms call is known."""
    assert set(KINDS) == set(kinds(Form.UNARY, Form.SCALAR, Form.BINARY))
    for kind in KINDS:
        spec = OPS[kind]
        assert spec.real and spec.field and spec.triton and spec.cuda, kind
        assert spec.doc.endswith("."), kind
    assert all(f.name == name for name, f in MATH.items())


@pytest.mark.parametrize("kind", KINDS)
def test_every_level_defines_the_op(kind: str) -> None:
    spec = OPS[kind]
    for level in spec.levels:
        classes = {cls.name: cls for cls in DIALECTS[level].operations}
        cls = classes[f"{level}.{kind}"]
        assert cls.KIND == kind and cls.__doc__ == spec.doc
    assert set(spec.levels) == {"kernel", "block", "thread"}


@pytest.mark.parametrize("kind", KINDS)
def test_the_interpreter_computes_the_tables_meaning(kind: str) -> None:
    module = op_module(kind)
    x, row, w, row_w = op_inputs(module)
    got = run(module, [x, row, w, row_w])
    f32 = np.float32
    want_kernel = _real(kind, x.astype(f32), row.astype(f32))
    want_block = _real(kind, x.astype(f32) @ w.astype(f32), row_w.astype(f32))
    np.testing.assert_allclose(got[0], want_kernel, rtol=2e-3, atol=1e-3)
    np.testing.assert_allclose(got[1], want_block, rtol=2e-3, atol=1e-3)


def _program(kind: str, twice: bool) -> object:
    """``op(x) + op(x)`` or ``op(x) * 2``: equal in any field."""
    g = new_kernel_graph("main")
    x = g.new_input((8, 32))
    row = g.new_input((1, 32))
    spec = OPS[kind]
    if spec.form is Form.SCALAR:
        y = getattr(g, kind)(x, CONSTANT)
    elif spec.form is Form.BINARY:
        y = getattr(g, kind)(x, row)
    else:
        y = getattr(g, kind)(x)
    g.mark_output(g.add(y, y) if twice else g.mul_scalar(y, 2.0))
    return g.module()


@pytest.mark.parametrize("kind", KINDS)
def test_the_verifier_proves_and_refutes_with_the_op(kind: str) -> None:
    from mirage_xdsl.verify.equivalence import equivalent

    verdict = equivalent(_program(kind, True), _program(kind, False))
    assert verdict.equivalent and verdict.false_positive_bound < 2**-40
    g = new_kernel_graph("main")
    x = g.new_input((8, 32))
    g.new_input((1, 32))
    g.mark_output(g.mul_scalar(x, 2.0))
    assert not equivalent(_program(kind, True), g.module()).equivalent


@pytest.mark.parametrize("kind", KINDS)
def test_search_layers_read_the_op(kind: str) -> None:
    from mirage_xdsl.search import cost_model, rules
    from mirage_xdsl.search.pruning import abstract_expr as ae

    spec = OPS[kind]
    xs = [ae.var("x"), ae.var("y")][: 2 if spec.form is Form.BINARY else 1]
    term = ae.op_expr(kind, xs, [(4, 8)] * len(xs), {"scalar": CONSTANT})
    assert isinstance(term, ae.Expr) and term != xs[0]
    assert kind in rules.RULES
    assert cost_model.op_flops(kind, [(4, 8)], (4, 8)) == spec.flops * 32


def test_the_fuzzer_draws_every_op_with_an_interval() -> None:
    from mirage_xdsl.fuzz import programs

    drawn = {k for k in elementwise_kinds() if OPS[k].interval is not None}
    assert drawn <= set(programs.KERNEL_MENU) & set(programs.BLOCK_MENU)
    assert not (set(elementwise_kinds()) - drawn) & set(programs.KERNEL_MENU)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_the_cuda_code_computes_the_op(kind: str, fused: bool) -> None:
    """The generated CUDA C, run by the GPU-IR emulator, matches the interpreter."""
    from mirage_xdsl.lowering.emulate import emulate

    module = op_module(kind, fused)
    xs = op_inputs(module)
    for got, ref in zip(emulate(module, xs), run(module, xs), strict=True):
        np.testing.assert_allclose(got, ref, rtol=5e-3, atol=2e-3)


@pytest.mark.parametrize("kind", KINDS)
def test_the_triton_code_spells_the_op(kind: str) -> None:
    from mirage_xdsl.lowering.triton import generate_triton

    source = generate_triton(op_module(kind)).source
    calls = re.findall(r"tl\.[\w.]+\(", OPS[kind].triton or "")
    assert all(call in source for call in calls), calls


@pytest.mark.slow
def test_triton_runs_every_op_like_the_interpreter() -> None:
    """Triton's CPU interpreter runs each op's kernels, unfused and fused."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONWARNINGS="ignore")
    script = Path(__file__).parent / "triton_interpret.py"
    proc = subprocess.run(
        [sys.executable, str(script), "ops", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    rows = [json.loads(s) for s in proc.stdout.splitlines() if s.startswith("{")]
    assert {r["case"] for r in rows} == {
        f"{kind} fused={fused}" for kind in KINDS for fused in (False, True)
    }, proc.stderr[-2000:]
    bad = [r for r in rows if "error" in r or max(r["errors"]) > 5e-3]
    assert not bad


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_both_backends_compile_the_op_to_cubin(kind: str) -> None:
    from mirage_xdsl.lowering import nvrtc
    from mirage_xdsl.lowering.cuda import generate_program

    pytest.importorskip("triton")
    from mirage_xdsl.runtime.triton_backend import compile_triton, lower_triton

    module = op_module(kind, fused=True)
    if nvrtc.available():
        assert nvrtc.compile_cuda(generate_program(module).source).cubin
    compiled = compile_triton(lower_triton(module), tune=False, form=0)
    assert all(c[:4] == b"\x7fELF" for c in compiled.cubins.values())


@pytest.mark.parametrize(
    "kind", [k for k in KINDS if OPS[k].torch], ids=lambda k: str(k)
)
def test_torch_captures_the_ops_aten_names(kind: str) -> None:
    torch = pytest.importorskip("torch")
    from mirage_xdsl.torch.capture import capture

    for name in OPS[kind].torch:
        fn = getattr(torch.ops.aten, name)
        x = torch.rand(4, 8, dtype=torch.float16) + 0.5
        module = capture(lambda x, fn=fn: fn(x), [x])
        names = [op.name for op in module.walk()]
        assert f"kernel.{kind}" in names, (name, names)
        (got,) = run(module, [x.numpy()])
        np.testing.assert_allclose(got, fn(x.float()).numpy(), rtol=2e-3, atol=1e-3)
