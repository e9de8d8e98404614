"""The Triton backend without a GPU: legalisation, printing, Triton's CPU
interpreter against ours, compilation to sm_90 cubin, and the runtime's
launches of Triton kernels (on the fake driver). Legalisation and printing run
without triton installed; the rest is marked ``needs_triton``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from math import prod
from pathlib import Path

import numpy as np
import pytest
from activation_program import activation_module
from softmax_program import (
    blocked_softmax_module,
    online_attention_module,
    softmax_module,
)

from mirage_xdsl.dialects import block
from mirage_xdsl.ir.builder import new_kernel_graph, new_threadblock_graph
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import parse
from mirage_xdsl.lowering.triton import generate_triton
from mirage_xdsl.lowering.triton_legalize import TILE_ATTR, LegalizeForTritonPass
from mirage_xdsl.lowering.triton_tiles import next_pow2
from mirage_xdsl.ops import OPS, Form, elementwise_kinds
from mirage_xdsl.semantics import interpreter
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS, random_inputs


def _triton_missing() -> str | None:
    try:
        import triton  # noqa: F401
    except ImportError as e:
        return str(e)
    return None


# Only what Triton itself runs (its interpreter, its compiler, the runtime's
# Triton backend) needs triton; legalisation and printing are ours alone.
TRITON_MISSING = _triton_missing()
needs_triton = pytest.mark.skipif(
    TRITON_MISSING is not None, reason=f"needs triton: {TRITON_MISSING}"
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.mlir"))
SCALE = 8
TOLERANCE = 2e-2


def _programs():
    for name in sorted(WORKLOADS):
        yield name, WORKLOADS[name].module
    for name, (_, build) in sorted(HANDWRITTEN.items()):
        yield name, build


PROGRAMS = list(_programs())


def test_next_pow2() -> None:
    assert [next_pow2(n) for n in (1, 2, 3, 16, 17, 48)] == [1, 2, 4, 16, 32, 64]


@pytest.mark.parametrize("form", ["dot", "fma"])
@pytest.mark.parametrize("name,build", PROGRAMS, ids=[n for n, _ in PROGRAMS])
def test_legalize_preserves_semantics_and_pads_tiles(name, build, form) -> None:
    module = build(1, SCALE)
    xs = random_inputs(module, 3, -0.5, 0.5)
    want = interpreter.run(module, xs)
    LegalizeForTritonPass(small_matmul=form).apply(make_context(), module)
    module.verify()
    for op in module.walk():
        assert op.name not in ("block.thread_graph",)
        if op.name.startswith("block.") and op.results:
            tile = tuple(op.attributes[TILE_ATTR].get_values())
            real = tuple(op.results[0].type.get_shape())
            assert all(
                p >= r and p & (p - 1) == 0 for p, r in zip(tile, real, strict=True)
            )
        if (
            isinstance(op, block.MatmulOp)
            and op.attributes["triton.matmul"].data == "dot"
        ):
            lhs = op.lhs.owner.attributes[TILE_ATTR].get_values()
            rhs = op.rhs.owner.attributes[TILE_ATTR].get_values()
            # one weight for every batch: the batches' rows make one dot
            rows = prod(lhs[:-1]) if prod(rhs[:-2]) == 1 else lhs[-2]
            assert min(rows, lhs[-1], *rhs[-2:]) >= 16
    for got, ref in zip(interpreter.run(module, xs), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


SHARED_WEIGHT = """builtin.module {
  func.func @shared(%0: tensor<BxMx128xf16>, %1: tensor<128x64xf16>, %2: tensor<BxMx64xf16>) -> tensor<BxMx64xf16> {
    %3 = kernel.customized(%0, %1, %2) grid [4, 1, 1] block [128, 1, 1] forloop 2 : (tensor<BxMx128xf16>, tensor<128x64xf16>, tensor<BxMx64xf16>) -> tensor<BxMx64xf16> {
    ^bb0(%4: tensor<BxMx128xf16>, %5: tensor<128x64xf16>, %6: tensor<BxMx64xf16>):
      %7 = block.input %4 imap [-1, -1, -1] fmap 2 : tensor<BxMx128xf16> -> tensor<BxMx64xf16>
      %8 = block.input %5 imap [2, -1, -1] fmap 1 : tensor<128x64xf16> -> tensor<1x64x16xf16>
      %9 = block.input %6 imap [2, -1, -1] fmap -1 : tensor<BxMx64xf16> -> tensor<BxMx16xf16>
      %10 = block.matmul %7, %8 : tensor<BxMx64xf16>, tensor<1x64x16xf16> -> tensor<BxMx16xf16>
      %11 = block.forloop_accum %10 reduce "none" : tensor<BxMx16xf16> -> tensor<BxMx16xf16>
      %12 = block.add %9, %11 : tensor<BxMx16xf16>, tensor<BxMx16xf16> -> tensor<BxMx16xf16>
      block.output %12 omap [2, -1, -1] : tensor<BxMx16xf16>
    }
    func.return %3 : tensor<BxMx64xf16>
  }
}
"""
"""Batches of a few rows times one weight tile every batch shares, plus a
residual: the matmul is one 2-d ``tl.dot`` over the batches' rows."""


SHARED_ROWS = [(8, 1, 16), (2, 3, 16), (4, 5, 32), (32, 1, 32)]
"""Batches, rows a batch and the rows of the one ``tl.dot`` they make."""


def _shared_weight(batch: int, rows: int) -> str:
    return SHARED_WEIGHT.replace("BxM", f"{batch}x{rows}")


@pytest.mark.parametrize("batch, rows, dot_rows", SHARED_ROWS)
def test_batches_sharing_a_weight_pad_only_their_rows_together_to_16(
    batch: int, rows: int, dot_rows: int
) -> None:
    """Eight decode rows ``[8, 1, K]`` times a weight are one dot of 16 rows
    (each batch's one row padded to 2), not of 128 (each padded to 16)."""
    text = _shared_weight(batch, rows)
    source = generate_triton(parse(make_context(), text, "<shared>")).source
    assert f"tl.dot(tl.reshape(x1, [{dot_rows}, 64])" in source


@needs_triton
def test_batches_sharing_a_weight_compute_as_ours_in_tritons_interpreter(
    tmp_path: Path,
) -> None:
    paths = []
    for batch, rows, _ in SHARED_ROWS:
        paths.append(tmp_path / f"shared_{batch}x{rows}.mlir")
        paths[-1].write_text(_shared_weight(batch, rows))
    rows = _interpret("file", *map(str, paths))  # one interpreter process
    assert len(rows) >= len(SHARED_ROWS)
    assert not _failures(rows)


def test_concat_matmul_becomes_a_sum_of_dots() -> None:
    module = HANDWRITTEN["lora_fused"][1](1, SCALE)
    LegalizeForTritonPass().apply(make_context(), module)
    names = [op.name for op in module.walk() if op.name.startswith("block.")]
    assert "block.concat" not in names
    assert names.count("block.matmul") == 3 and "block.add" in names


def test_plain_program_goes_through_default_customize() -> None:
    """A kernel per op by default, but the exp, its row sums and the
    division are one kernel (``fold-producers``), between the two products:
    the second product's loop reads the probabilities it stored, so its
    ``tl.dot`` form pipelines the loads. Three kernels, the scores and the
    probabilities between them."""
    program = generate_triton(WORKLOADS["gqa"].module(1, SCALE))
    assert len(program.kernels) == 3
    kinds = [b.kind for b in program.buffers]
    assert kinds.count("intermediate") == 2
    assert "@triton.jit" in program.source and "def run(*inputs)" in program.source


def test_returning_an_input_is_refused() -> None:
    text = """
    func.func @f(%x: tensor<4x4xf16>) -> tensor<4x4xf16> {
      func.return %x : tensor<4x4xf16>
    }"""
    from mirage_xdsl.ir.diagnostics import MirageError

    with pytest.raises(MirageError, match="returns an input unchanged"):
        generate_triton(parse(make_context(), text, "f.mlir"))


@pytest.mark.parametrize("kind", elementwise_kinds("block"))
def test_elementwise_ops_print_their_table_form_and_keep_padding_by_it(
    kind: str,
) -> None:
    """Each element-wise op prints its op table form (``OpSpec.triton``), and
    a sum over a padded dim reads its result unmasked exactly when the table
    says it maps 0 to 0 (``OpSpec.zero_preserving``)."""
    spec = OPS[kind]
    g = new_kernel_graph()
    x = g.new_input((4, 12))  # the 12 pads to 16
    bg = new_threadblock_graph((1, 1, 1))
    bx = bg.new_input(x, (-1, -1, -1))
    args = {Form.UNARY: (bx,), Form.SCALAR: (bx, 2.0), Form.BINARY: (bx, bx)}
    y = getattr(bg, kind)(*args[spec.form])
    bg.new_output(bg.reduce_sum(y, 1), (-1, -1, -1))
    (out,) = g.customized([x], bg)
    g.mark_output(out)
    source = generate_triton(g.module()).source
    x1 = "x1.to(tl.float32)"
    assert f"v2 = {spec.triton_expr(x1, x1, '2.0')}  # block.{kind}" in source
    assert ("tl.where(" in source) == (not spec.zero_preserving)


def _interpret(*args: str) -> list[dict]:
    """Run tests/triton_interpret.py under Triton's CPU interpreter."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "triton_interpret.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    rows = [
        json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")
    ]
    assert rows, proc.stderr[-2000:]
    return rows


def _failures(rows: list[dict]) -> list[str]:
    bad = []
    for r in rows:
        if "error" in r:
            bad.append(f"{r['case']}: {r['error']}")
        elif not all(e <= TOLERANCE for e in r["errors"]):  # NaN fails too
            bad.append(f"{r['case']} ({r['form']}): {r['errors']}")
    return bad


@needs_triton
@pytest.mark.parametrize(
    "batch, small",
    [
        pytest.param(1, True, marks=pytest.mark.slow),
        pytest.param(1, False, marks=pytest.mark.slow),
        pytest.param(8, False, marks=pytest.mark.slow),
    ],
    ids=["b1-small-grids", "b1", "b8"],
)
def test_interpreted_kernels_match_ours_on_every_workload(
    batch: int, small: bool
) -> None:
    """Every workload and hand-written µGraph (dims / 8), every matmul form,
    run by Triton's interpreter and compared with ours. The default run gives
    the hand-written µGraphs 8 blocks and 8 iterations (``--small``); their own
    grids take minutes on two cores and run with ``-m slow``."""
    rows = _interpret(
        "workloads", str(SCALE), str(batch), *(["--small"] if small else [])
    )
    assert len({r["case"] for r in rows}) == len(PROGRAMS)
    assert not _failures(rows)


@pytest.mark.slow
@needs_triton
def test_interpreted_random_ugraphs_match_ours() -> None:
    rows = _interpret("random", "12", "100")
    assert len({r["case"] for r in rows}) == 12
    assert not _failures(rows)


@needs_triton
def test_interpreted_activations_match_ours() -> None:
    """Every activation op at the kernel, block and thread levels, run by
    Triton's interpreter on inputs in [-2, 2] (both signs of each op)."""
    rows = _interpret("activations", "0")
    assert {r["case"] for r in rows} == {
        "activations fused=False",
        "activations fused=True",
    }
    assert not _failures(rows)


@needs_triton
def test_interpreted_safe_softmax_handles_large_inputs() -> None:
    """Softmax of normal inputs times 10 (fp16), run by Triton's interpreter
    against the exact float64 softmax: every safe form (kernel ops, one
    customized kernel, its thread graph; rows padded from 100 to 128, rows
    shorter than a warp, a 3-d tensor) is accurate. The inputs do test the
    shift: their exp overflows fp16. The plain program is accurate too, as
    its exp is no kernel of its own (``fold-producers``): the kernels that
    read it compute it in fp32 and never store it. Attention with the online
    softmax (one kernel looping over the keys, every tile padded) is accurate
    in both matmul forms too."""
    from softmax_program import large_inputs

    with np.errstate(over="ignore"):
        assert np.isinf(np.exp(large_inputs((8, 100)))).any()
    rows = _interpret("softmax", "0")
    safe = [r for r in rows if "plain" not in r["case"]]
    plain = [r for r in rows if "plain" in r["case"]]
    online = [r for r in rows if r["case"] == "online attention"]
    assert len(safe) == 11 and len(plain) == 3 and len(online) == 2
    assert not _failures(safe)
    assert not _failures(plain)


# --- compilation to cubin (Triton's own lowering, no GPU) -------------------------


def _compile_all_forms(module) -> list:
    from mirage_xdsl.runtime.triton_backend import compile_triton, lower_triton

    program = lower_triton(module)
    forms = max(len(k.variants) for k in program.kernels)
    return [compile_triton(program, tune=False, form=f) for f in range(forms)]


def _check_compiled(compiled) -> None:
    for launch in compiled.program.launches:
        assert compiled.cubins[launch.name][:4] == b"\x7fELF"
        assert launch.block[0] % 32 == 0 and launch.block[0] <= 1024
        assert 0 <= launch.shared_bytes <= 227 * 1024
        assert launch.waits  # so the runtime may launch it programmatically


@needs_triton
def test_the_printed_module_compiles_for_any_gpu_and_the_runtimes_kernels_wait() -> (
    None
):
    """Grid dependency control needs sm_90: the module as printed leaves it
    off (its own runner launches plainly, on any GPU); the runtime's sm_90
    compile turns it on, and reads the wait off each binary."""
    import linecache

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from mirage_xdsl.runtime.triton_compile import KernelConfig, compile_kernel, waits

    program = generate_triton(WORKLOADS["rmsnorm_linear"].module(1, 16))
    kernel = program.kernels[0]
    name = "<printed rmsnorm_linear>"
    linecache.cache[name] = (0, None, program.source.splitlines(True), name)
    namespace: dict = {"__name__": "printed_rmsnorm_linear"}
    exec(compile(program.source, name, "exec"), namespace)
    fn = namespace[kernel.variants[0]]
    sm80 = triton.compile(
        ASTSource(fn, dict(zip(fn.arg_names, kernel.signature, strict=True)), None, {}),
        target=GPUTarget("cuda", 80, 32),
    )
    assert "griddepcontrol" not in sm80.asm["ptx"]
    ours = compile_kernel(program.source, kernel.signature, KernelConfig(fn.__name__))
    assert waits(ours) and "griddepcontrol.launch_dependents" in ours.ptx


def _kernel_text(source: str, name: str) -> str:
    start = source.index(f"def {name}(")
    return source[start : source.index("\n\n", start)]


def test_what_reads_only_program_inputs_runs_before_the_wait() -> None:
    """The split-K combine sums the squares of X (a program input) before
    ``gdc_wait()``, in a loop of its own; the partial products (the kernel
    ahead's output) are loaded, and the result stored, after it. The
    FlashDecoding combine reads only the kernel ahead's outputs, so it waits
    before its first load."""
    source = generate_triton(HANDWRITTEN["rmsnorm_linear_splitk"][1](1)).source
    combine = _kernel_text(source, "rmsnorm_linear_k1")
    wait = combine.index("gdc_wait()")
    assert combine.index("gdc_launch_dependents()") < wait
    before, after = combine[:wait], combine[wait:]
    assert before.count("for it in range(0, 4):") == 1
    assert "tl.load(in1 " in before and "rms" in before  # X, its squares
    assert "tl.load(in0 " in after and "tl.load(in1 " not in after  # the parts
    assert "tl.store(" in after and "tl.store(" not in before
    source = generate_triton(HANDWRITTEN["gqa_flashdecoding"][1](1)).source
    combine = _kernel_text(source, "gqa_k1")
    assert combine.index("gdc_wait()") < combine.index("tl.load(")
    # the online softmax's running maximum ends each iteration, so a kernel
    # with a shifted accumulator keeps all of its work after the wait
    source = generate_triton(HANDWRITTEN["gqa_online_softmax"][1](1)).source
    online = _kernel_text(source, "gqa_k0")
    assert "shifted" in online
    assert online.index("gdc_wait()") < online.index("tl.load(")


@needs_triton
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_compile_to_cubin(path: Path) -> None:
    module = parse(make_context(), path.read_text(), str(path))
    for compiled in _compile_all_forms(module):
        _check_compiled(compiled)


@needs_triton
@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("name", sorted(HANDWRITTEN))
def test_handwritten_ugraphs_compile_to_cubin(name: str, batch: int) -> None:
    for compiled in _compile_all_forms(HANDWRITTEN[name][1](batch)):
        _check_compiled(compiled)


@needs_triton
@pytest.mark.parametrize("seed", range(50))
def test_random_ugraphs_compile_to_cubin(seed: int) -> None:
    from mirage_xdsl.fuzz.programs import random_module

    for compiled in _compile_all_forms(random_module(np.random.default_rng(seed))):
        _check_compiled(compiled)


@needs_triton
@pytest.mark.parametrize("fused", [False, True])
def test_activations_compile_to_cubin(fused: bool) -> None:
    for compiled in _compile_all_forms(activation_module(fused)):
        _check_compiled(compiled)
    source = generate_triton(activation_module(fused)).source
    assert "tl.maximum(" in source and "tl.math.erf(" in source


@needs_triton
@pytest.mark.parametrize("fused", [False, True])
def test_safe_softmax_compiles_to_cubin(fused: bool) -> None:
    """reduce_max as a kernel op and inside a customized kernel: tl.max over
    a row padded with -inf compiles for sm_90."""
    for module in (softmax_module(), blocked_softmax_module(fused=fused)):
        for compiled in _compile_all_forms(module):
            _check_compiled(compiled)
    source = generate_triton(blocked_softmax_module(fused=fused)).source
    assert "tl.max(tl.where(" in source and "float('-inf')" in source


@needs_triton
def test_online_attention_compiles_to_cubin() -> None:
    """The shifted accumulations keep one running maximum per shift, carried
    through the loop, and rescale both sums every iteration; each form
    compiles for sm_90."""
    module = online_attention_module()
    for compiled in _compile_all_forms(module):
        _check_compiled(compiled)
    source = generate_triton(module).source
    forms = source.count("@triton.jit")
    assert forms == 2  # tl.dot and fma
    assert source.count("float('-inf'), tl.float32)  # running maximum") == forms
    assert source.count("tl.maximum(run") == forms
    assert source.count(" * wold") == 2 * forms


# --- the runtime launches Triton kernels like any other --------------------------


@needs_triton
def test_runtime_launches_triton_kernels_with_scratch_parameters() -> None:
    """Arguments, then one NULL per scratch parameter; 32 x num_warps threads."""
    from fake_driver import FakeDriver, view

    from mirage_xdsl.runtime import compile
    from mirage_xdsl.runtime.driver import Device, Driver

    text = """
    func.func @f(%x: tensor<16x64xf16>, %y: tensor<16x64xf16>) -> tensor<16x64xf16> {
      %z = kernel.mul %x, %y : tensor<16x64xf16>, tensor<16x64xf16> -> tensor<16x64xf16>
      func.return %z : tensor<16x64xf16>
    }"""
    module = parse(make_context(), text, "f.mlir")
    compiled = compile(module, backend="triton", tune=False)
    (launch,) = compiled.program.launches
    arity = len(launch.args) + len(launch.scratch)

    def mul(grid, block_, p):
        n = 16 * 64
        view(p[2], np.float16, n)[:] = view(p[0], np.float16, n) * view(
            p[1], np.float16, n
        )

    fake = FakeDriver(kernels={launch.name: (arity, mul)})
    compiled = compile(
        module, backend="triton", tune=False, device=Device(0, Driver(fake))
    )
    rng = np.random.default_rng(0)
    x, y = (rng.uniform(-1, 1, (16, 64)).astype(np.float16) for _ in range(2))
    (out,) = compiled.run(x, y)
    np.testing.assert_allclose(out, x * y)
    (done,) = fake.launches
    assert done.block == (32 * compiled.choices["f_k0"].num_warps, 1, 1)
    assert done.pointers[3:] == [0] * len(launch.scratch)
    assert compiled.backend == "triton"
    compiled.close()
    assert fake.allocations == {}


def test_unknown_backend_is_one_line() -> None:
    from mirage_xdsl.ir.diagnostics import MirageError
    from mirage_xdsl.runtime import compile

    with pytest.raises(MirageError, match="unknown backend 'ptx'"):
        compile(WORKLOADS["lora"].module(1, SCALE), backend="ptx")


@needs_triton
def test_a_tile_over_shared_memory_is_tiled_further_not_sent_to_cuda(
    tmp_path: Path,
) -> None:
    """A 4096 x 16 weight tile loaded whole would need more shared memory
    under Triton than a block has: legalisation splits its matmul along K
    into for-loop iterations (4 of 1024), the kernel compiles within a
    block's shared memory, stays on Triton under ``auto``, and computes what
    the original block graph computes (Triton's interpreter)."""
    from mirage_xdsl.runtime import compile

    module = parse(make_context(), WHOLE_K_TILE, "f.mlir")
    program = generate_triton(module)
    (k,) = program.kernels
    assert k.forloop == 4 and "it * 1024" in program.source
    compiled = compile(module, tune=False)
    assert compiled.backend == "triton" and not compiled.fallback
    _check_compiled(compiled)
    path = tmp_path / "f.mlir"
    path.write_text(WHOLE_K_TILE)
    assert not _failures(_interpret("file", str(path)))


WHOLE_K_TILE = """
func.func @f(%x: tensor<1x4096xf16>, %w: tensor<4096x256xf16>) -> tensor<1x256xf16> {
  %y = kernel.customized(%x, %w) grid [16, 1, 1] block [256, 1, 1] forloop 1 : (tensor<1x4096xf16>, tensor<4096x256xf16>) -> tensor<1x256xf16> {
  ^bb0(%a: tensor<1x4096xf16>, %b: tensor<4096x256xf16>):
    %i = block.input %a imap [-1, -1, -1] fmap -1 : tensor<1x4096xf16> -> tensor<1x4096xf16>
    %j = block.input %b imap [1, -1, -1] fmap -1 : tensor<4096x256xf16> -> tensor<4096x16xf16>
    %m = block.matmul %i, %j : tensor<1x4096xf16>, tensor<4096x16xf16> -> tensor<1x16xf16>
    block.output %m omap [1, -1, -1] : tensor<1x16xf16>
  }
  func.return %y : tensor<1x256xf16>
}"""


# --- float constants (mul_scalar, add_scalar, rms_norm eps) -----------------------

CONSTANTS = ROOT / "tests" / "filecheck" / "inputs" / "constants.mlir"


@needs_triton
def test_float_constants_compile_and_match_under_the_interpreter() -> None:
    """The constants program compiles to cubin in every form and Triton's
    interpreter reproduces our interpreter on it."""
    module = parse(make_context(), CONSTANTS.read_text(), str(CONSTANTS))
    for compiled in _compile_all_forms(module):
        _check_compiled(compiled)
    source = generate_triton(module).source
    assert "* 0.10206207261596575" in source and "+ (-1.5)" in source
    assert "/ 64.0 + 1e-06)" in source
    rows = _interpret("file", str(CONSTANTS))
    assert not _failures(rows), rows
