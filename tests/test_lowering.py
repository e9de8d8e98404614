"""The lowering pipeline computes what the interpreter computes.

``default-customize`` is checked with the interpreter itself; the GPU-level IR
is run by the SIMT emulator (``lowering/emulate.py``), which models shared
memory, cp.async groups, ldmatrix/mma fragment layouts and barriers, and
compared with the interpreter on the same random inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from activation_program import activation_module
from softmax_program import (
    blocked_softmax_module,
    large_inputs,
    online_attention_module,
    reference_attention,
    reference_softmax,
    softmax_module,
)
from xdsl.dialects import gpu

from mirage_xdsl.dialects import gpux, kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.builder import new_kernel_graph, new_threadblock_graph
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import parse
from mirage_xdsl.lowering.aliases import is_alias
from mirage_xdsl.lowering.cuda import generate_program, lowered
from mirage_xdsl.lowering.default_customize import DefaultCustomizePass
from mirage_xdsl.lowering.emulate import Emulator, emulate
from mirage_xdsl.lowering.emulate_state import EmulationError
from mirage_xdsl.lowering.fuse_thread_graphs import FuseThreadGraphsPass
from mirage_xdsl.semantics.interpreter import run
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS, random_inputs

SCALE = 8
"""Workload dims divided by this: small enough to emulate in seconds."""


def rel_error(got: np.ndarray, ref: np.ndarray) -> float:
    got = np.asarray(got, np.float64)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def inputs_for(module, seed: int = 0) -> list[np.ndarray]:
    # |x| <= 0.5 keeps exp() of attention scores within fp16 range.
    return random_inputs(module, seed, -0.5, 0.5)


@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_default_customize_preserves_semantics(name: str, batch: int) -> None:
    module = WORKLOADS[name].module(batch, SCALE)
    xs = inputs_for(module, seed=batch)
    ref = run(module, xs)
    DefaultCustomizePass().apply(make_context(), module)
    module.verify()
    assert not [
        op
        for op in module.walk()
        if isinstance(op, t.TensorOp)
        and op.name.startswith("kernel.")
        and not is_alias(op)
    ]
    assert [op for op in module.walk() if isinstance(op, kernel.CustomizedOp)]
    for got, want in zip(run(module, xs), ref, strict=True):
        assert rel_error(got, want) < 1e-5


def _programs():
    for name in sorted(WORKLOADS):
        yield name, WORKLOADS[name].module
    for name, (_, build) in sorted(HANDWRITTEN.items()):
        yield name, build


@pytest.mark.parametrize("batch", [1, pytest.param(8, marks=pytest.mark.slow)])
@pytest.mark.parametrize(
    "name,build", list(_programs()), ids=[n for n, _ in _programs()]
)
def test_emulated_kernels_match_interpreter(name: str, build, batch: int) -> None:
    assert_emulation_matches(build(batch, SCALE), seed=10 + batch)


def test_fused_thread_graph_is_emulated_correctly() -> None:
    g = new_kernel_graph("chain")
    x = g.new_input((8, 64))
    y = g.new_input((8, 1))
    bg = new_threadblock_graph((2, 1, 1), (64, 1, 1), 1)
    bx, by = bg.new_input(x, (0, -1, -1), -1), bg.new_input(y, (0, -1, -1), -1)
    e = bg.exp(bx)
    out = bg.div(bg.mul(bg.silu(e), bg.add(by, by)), bg.reduction(e, 1))
    bg.new_output(out, (0, -1, -1))
    (o,) = g.customized([x, y], bg)
    g.mark_output(o)
    module = g.module()
    xs = inputs_for(module, seed=3)
    ref = run(module, xs)
    FuseThreadGraphsPass().apply(make_context(), module)
    assert any(op.name == "block.thread_graph" for op in module.walk())
    (got,) = emulate(module, xs)
    assert rel_error(got, ref[0]) < 2e-3


@pytest.mark.parametrize("fused", [False, True])
def test_activations_are_emulated_correctly(fused: bool) -> None:
    """Every activation op at the kernel, block and thread levels, on inputs
    of both signs, through the CUDA lowering and its emulator."""
    module = activation_module(fused)
    xs = random_inputs(module, 0, -2.0, 2.0)
    ref = run(module, xs)
    got = emulate(module, xs)
    for g, r in zip(got, ref, strict=True):
        assert rel_error(g, r) < 5e-3


@pytest.mark.parametrize("shape", [(8, 100), (6, 20), (4, 3, 40)])
def test_safe_softmax_is_emulated_correctly_on_large_inputs(shape) -> None:
    """Softmax of normal inputs times 10 through the CUDA lowering and its
    emulator, against the exact float64 softmax: the row maximum (warp
    shuffles for rows of 32 or more, one thread per shorter row) keeps every
    safe form finite and accurate, while the plain program's exp kernel
    overflows fp16."""
    x = large_inputs(shape)
    ref = reference_softmax(x)
    for module in (
        softmax_module(shape),
        blocked_softmax_module(shape),
        blocked_softmax_module(shape, fused=True),
    ):
        (got,) = emulate(module, [x])
        assert np.isfinite(got).all()
        assert np.abs(got - ref).max() < 2e-3
    (plain,) = emulate(softmax_module(shape, safe=False), [x])
    assert not np.isfinite(plain).all()


@pytest.mark.parametrize("head", [16, 32])
def test_online_attention_is_emulated_correctly_on_large_inputs(head: int) -> None:
    """Attention with the online softmax through the CUDA lowering and its
    emulator, on inputs whose scores reach the hundreds: the running maximum
    (an extra column of each shifted accumulator) and the rescaling keep it
    finite and close to the exact float64 answer, with rows of keys shorter
    (16 per iteration) and not shorter (32) than a warp."""
    module = online_attention_module(keys=48 if head == 16 else 96, head=head)
    q, k, v = (
        large_inputs(tuple(a.type.get_shape()), seed, 2.0)
        for seed, a in enumerate(module.body.block.ops.first.args)
    )
    (got,) = emulate(module, [q, k, v])
    ref = reference_attention(q, k, v)
    assert np.isfinite(got).all()
    assert rel_error(got, ref) < 5e-3  # fp16 probabilities and output


def test_reduce_max_is_emulated_correctly() -> None:
    """kernel.reduce_max over each dim of a 3-d tensor of both signs (the
    default partition gives each block whole rows) matches the interpreter."""
    g = new_kernel_graph("maxima")
    x = g.new_input((4, 40, 6))
    for dim in range(3):
        g.mark_output(g.reduce_max(x, dim))
    module = g.module()
    xs = random_inputs(module, 0, -2.0, 2.0)
    for got, ref in zip(emulate(module, xs), run(module, xs), strict=True):
        assert np.array_equal(got, ref.astype(np.float16).astype(got.dtype))


def _fused_rmsnorm_linear():
    """A fused RMSNorm+linear whose block matmul (2x64 @ 64x64) uses tensor cores."""
    from mirage_xdsl.workloads import build_rmsnorm_linear_fused

    return build_rmsnorm_linear_fused(1, 4, blocks=16, forloop=16)


def _gpu_module():
    module = lowered(_fused_rmsnorm_linear())
    assert any(isinstance(op, gpux.MmaOp) for op in module.walk())
    return module


def test_emulator_detects_a_missing_barrier() -> None:
    module = _gpu_module()
    # The barrier between waiting for this iteration's tiles and reading them.
    (barrier,) = [
        op
        for op in module.walk()
        if isinstance(op, gpu.BarrierOp)
        and isinstance(op.prev_op, gpux.CpAsyncWaitOp)
        and op.parent_op().name == "scf.for"
    ]
    barrier.detach()
    barrier.erase()
    xs = inputs_for(_fused_rmsnorm_linear())
    with pytest.raises(EmulationError, match="race|without a barrier"):
        Emulator(module).run(xs)


def test_emulator_checks_fragment_layouts() -> None:
    """Loading B without the transpose must give a wrong product."""
    module = _gpu_module()
    template = _fused_rmsnorm_linear()
    xs = inputs_for(template)
    ref = run(template, xs)[0]
    (good,) = Emulator(module).run(xs)
    assert rel_error(good, ref) < 5e-3
    from xdsl.dialects.builtin import BoolAttr

    for op in module.walk():
        if isinstance(op, gpux.LdmatrixOp) and op.trans.value.data:
            op.properties["trans"] = BoolAttr.from_bool(False)
    (bad,) = Emulator(module).run(xs)
    assert rel_error(bad, ref) > 0.1


def test_generate_program_contract() -> None:
    module = HANDWRITTEN["gqa_flashdecoding"][1](1, 1)
    program = generate_program(module)
    assert program.function == "gqa"
    assert [b.name for b in program.inputs()] == ["input0", "input1", "input2"]
    assert [b.shape for b in program.outputs()] == [(1, 2, 256, 64)]
    temps = [b for b in program.buffers if b.kind == "intermediate"]
    assert [b.shape for b in temps] == [(1, 2, 256, 1024), (1, 2, 256, 16)]
    assert all(b.dtype == "f16" for b in program.buffers)
    first, second = program.launches
    assert first.grid == (2, 16, 1) and first.block == (128, 1, 1)
    assert first.args == ("input0", "input1", "input2", "tmp0", "tmp1")
    assert second.args == ("tmp0", "tmp1", "output0")
    for launch in program.launches:
        assert 'extern "C" __global__' in program.source
        assert f"{launch.name}(" in program.source
        assert 0 < launch.shared_bytes <= 227 * 1024


def assert_emulation_matches(module, seed: int = 0) -> None:
    """Every output of the emulated GPU code is written and matches the interpreter."""
    xs = inputs_for(module, seed)
    ref = run(module, xs)
    got = emulate(module, xs)
    assert len(got) == len(ref)
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        assert not np.isnan(g).any(), f"output {i}: an element was never written"
        assert rel_error(g, r) < 5e-3, f"output {i} differs"


THREAD_GRAPH_SHAPES = """
func.func @main(%x: tensor<4x32xf16>, %y: tensor<1x32xf16>)
    -> (tensor<4x32xf16>, tensor<1x32xf16>) {
  %big, %small = kernel.customized(%x, %y) grid [1, 1, 1] block [128, 1, 1]
      forloop 1 : (tensor<4x32xf16>, tensor<1x32xf16>)
      -> (tensor<4x32xf16>, tensor<1x32xf16>) {
  ^bb0(%a: tensor<4x32xf16>, %b: tensor<1x32xf16>):
    %ta = block.input %a imap [-1, -1, -1] fmap -1 : tensor<4x32xf16> -> tensor<4x32xf16>
    %tb = block.input %b imap [-1, -1, -1] fmap -1 : tensor<1x32xf16> -> tensor<1x32xf16>
    %r0, %r1 = block.thread_graph(%ta, %tb) : (tensor<4x32xf16>, tensor<1x32xf16>)
        -> (RESULT_TYPES) {
    ^bb0(%u: tensor<4x32xf16>, %v: tensor<1x32xf16>):
      %e = thread.exp %v : tensor<1x32xf16> -> tensor<1x32xf16>
      %p = thread.mul %u, %e : tensor<4x32xf16>, tensor<1x32xf16> -> tensor<4x32xf16>
      thread.yield YIELDED
    }
    block.output BIG omap [-1, -1, -1] : tensor<4x32xf16>
    block.output SMALL omap [-1, -1, -1] : tensor<1x32xf16>
  }
  func.return %big, %small : tensor<4x32xf16>, tensor<1x32xf16>
}
"""


@pytest.mark.parametrize("big_first", [True, False])
def test_thread_graph_results_of_different_shapes(big_first: bool) -> None:
    """A result computed from a broadcast operand alone is a smaller tile.

    Looping over the first result's shape would store the smaller result
    past its tile (big first) or leave the larger one short (small first).
    """
    big, small = ("tensor<4x32xf16>", "%p"), ("tensor<1x32xf16>", "%e")
    first, second = (big, small) if big_first else (small, big)
    text = (
        THREAD_GRAPH_SHAPES.replace("RESULT_TYPES", f"{first[0]}, {second[0]}")
        .replace("YIELDED", f"{first[1]}, {second[1]} : {first[0]}, {second[0]}")
        .replace("BIG", "%r0" if big_first else "%r1")
        .replace("SMALL", "%r1" if big_first else "%r0")
    )
    module = parse(make_context(), text, "<thread graph shapes>")
    module.verify()
    assert_emulation_matches(module, seed=4)


def test_invariant_inputs_do_not_share_shared_memory() -> None:
    """Both inputs are copied in before the first op, so neither may take the
    other's bytes, though ``x`` is dead in program order before ``y`` is loaded."""
    g = new_kernel_graph("loads")
    x = g.new_input((8, 64))
    y = g.new_input((8, 64))
    bg = new_threadblock_graph((1, 1, 1), (128, 1, 1), 1)
    total = bg.reduction(bg.exp(bg.new_input(x, (-1, -1, -1), -1)), 1)
    bg.new_output(bg.div(bg.new_input(y, (-1, -1, -1), -1), total), (-1, -1, -1))
    (o,) = g.customized([x, y], bg)
    g.mark_output(o)
    assert_emulation_matches(g.module(), seed=5)


def test_outputs_are_stored_after_the_ops_that_follow_them() -> None:
    """Output tiles are stored at the end of the kernel, so an op after a
    ``block.output`` must not reuse the bytes of the tile it saves."""
    g = new_kernel_graph("late_store")
    x = g.new_input((8, 64))
    bg = new_threadblock_graph((1, 1, 1), (128, 1, 1), 1)
    tile = bg.new_input(x, (-1, -1, -1), -1)
    acc = bg.forloop_accum(tile)
    bg.new_output(bg.exp(tile), (-1, -1, -1))
    bg.new_output(bg.square(acc), (-1, -1, -1))
    first, second = g.customized([x], bg)
    g.mark_output(first)
    g.mark_output(second)
    assert_emulation_matches(g.module(), seed=6)


def test_float_constants_are_emulated_correctly() -> None:
    """mul_scalar, add_scalar (also in a thread graph) and rms_norm eps, through
    the CUDA lowering, match the interpreter."""
    from pathlib import Path

    path = Path(__file__).parent / "filecheck" / "inputs" / "constants.mlir"
    assert_emulation_matches(parse(make_context(), path.read_text(), str(path)))
