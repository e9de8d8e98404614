"""A contiguous ``kernel.slice`` is no kernel: an alias of its operand's buffer
from an element offset on, in both GPU backends and the runtime; other
slices, and returned ones, are copy kernels.

Each program of ``tests/slice_program.py`` runs through the CUDA C lowering
on the emulator and through Triton's interpreter, against our interpreter.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from fake_driver import FakeDriver
from slice_program import PROGRAMS, batched_projection, nested, projection
from test_cuda_compile import check_program, needs_nvrtc
from test_lowering import assert_emulation_matches
from test_runtime import FAKE_KERNELS
from test_triton import _failures, _interpret

from mirage_xdsl.dialects import kernel
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.lowering.aliases import is_alias
from mirage_xdsl.lowering.cuda import generate_program
from mirage_xdsl.lowering.default_customize import DefaultCustomizePass
from mirage_xdsl.lowering.triton import generate_triton
from mirage_xdsl.runtime import CompiledProgram
from mirage_xdsl.runtime.cache import CubinCache
from mirage_xdsl.runtime.driver import Device, Driver
from mirage_xdsl.runtime.executable import validate_program
from mirage_xdsl.runtime.selftest import SELFTESTS

NAMES = sorted(PROGRAMS)


def slices(module) -> list[kernel.SliceOp]:
    return [op for op in module.walk() if isinstance(op, kernel.SliceOp)]


@pytest.mark.parametrize("name", NAMES)
def test_emulated_cuda_matches_interpreter(name: str) -> None:
    assert_emulation_matches(PROGRAMS[name](), seed=3)


@needs_nvrtc
def test_cuda_with_offsets_compiles() -> None:
    check_program(generate_program(projection()))


@pytest.mark.slow
def test_interpreted_triton_matches_interpreter() -> None:
    rows = _interpret("slices", "0")
    assert {r["case"] for r in rows} == {f"slices {n}" for n in NAMES}
    assert not _failures(rows)


def test_which_slices_are_aliases() -> None:
    """At one row the parts read by kernels are aliases, the returned one is
    not; at two rows none is contiguous."""
    assert [is_alias(op) for op in slices(projection())] == [True, True, False]
    assert [is_alias(op) for op in slices(batched_projection())] == [False] * 3
    assert [is_alias(op) for op in slices(nested())] == [True, True, True]


def test_a_slice_starting_off_a_16_byte_boundary_is_copied() -> None:
    """Triton takes every pointer as 16-byte aligned: an alias starting 3
    halves in would break its vector loads."""
    from mirage_xdsl.ir.builder import new_kernel_graph

    g = new_kernel_graph("f")
    y = g.exp(g.new_input((1, 1, 32)))
    g.mark_output(g.exp(g.slice(y, 2, 3, 19)))
    g.mark_output(g.exp(g.slice(y, 2, 8, 24)))
    assert [is_alias(op) for op in slices(g.module())] == [False, True]


def test_default_customize_keeps_alias_slices() -> None:
    module = projection()
    DefaultCustomizePass().apply(make_context(), module)
    module.verify()
    assert [op.window for op in slices(module)] == [(2, 0, 64), (2, 64, 80)]


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_alias_slices_launch_nothing_and_are_read_at_their_offset(backend) -> None:
    def launches(module):
        if backend == "triton":
            return [(k.args, k.offsets) for k in generate_triton(module).kernels]
        return [(x.args, x.offsets) for x in generate_program(module).launches]

    one, two = launches(projection()), launches(batched_projection())
    # the copies of the two parts read in place; under Triton, exp reads q's
    # window of the batched projection in place as well (fold-slices)
    assert len(two) - len(one) == (1 if backend == "triton" else 2)
    assert (("tmp0", "output1"), (64, 0)) in one  # k, 64 elements in
    assert all(set(offsets) == {0} for _, offsets in two)
    nested_reads = [(args[0], offsets[0]) for args, offsets in launches(nested())]
    assert ("tmp0", 32) in nested_reads and ("input2", 64) in nested_reads


def test_returned_slice_is_written_by_a_copy_kernel() -> None:
    module = projection()
    DefaultCustomizePass().apply(make_context(), module)
    copies = [
        op
        for op in module.walk()
        if isinstance(op, kernel.CustomizedOp)
        and any(
            getattr(inner, "window_of", None) == (2, 80, 96) for inner in op.entry.ops
        )
    ]
    assert len(copies) == 1


def test_runtime_points_each_argument_at_its_offset() -> None:
    """The second kernel reads ``a`` 256 elements (512 bytes) in, over 15 of
    its 16 blocks: ``out[i] = a[i] * b[i] + a[i + 256]``."""
    program = SELFTESTS["two_kernels_with_intermediate"].program
    mul, add = program.launches
    add = replace(add, grid=(15, 1, 1), offsets=(0, 256, 0))
    program = replace(program, launches=(mul, add))
    fake = FakeDriver(kernels=dict(FAKE_KERNELS))
    compiled = CompiledProgram(
        program, device=Device(0, Driver(fake)), cache=CubinCache(None)
    )
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (64, 64)).astype(np.float16) for _ in range(2))
    (out,) = compiled.run(a, b)
    first, second = fake.launches
    assert second.pointers[1] == first.pointers[0] + 512
    n = 15 * 256
    flat_a, flat_b = a.reshape(-1).astype(np.float32), b.reshape(-1)
    want = flat_a[:n] * flat_b[:n] + flat_a[256 : 256 + n]
    got = out.reshape(-1)[:n].astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
    compiled.close()


@pytest.mark.parametrize(
    "offsets, message",
    [((0, 4096, 0), "offset 4096 lies outside buffer 'a'"), ((0, 1), "2 offsets")],
)
def test_bad_offsets_are_one_line(offsets, message) -> None:
    program = SELFTESTS["two_kernels_with_intermediate"].program
    mul, add = program.launches
    bad = replace(program, launches=(mul, replace(add, offsets=offsets)))
    with pytest.raises(MirageError) as e:
        validate_program(bad)
    assert message in str(e.value) and "\n" not in str(e.value)


def one_token_decoder_layer():
    """A captured decoder layer at one token: its q, k and v are contiguous
    slices (offsets 0, 64 and 96) of one projection, read in place."""
    torch = pytest.importorskip("torch")
    from mirage_xdsl.torch import capture
    from mirage_xdsl.torch.models import DecoderLayer, trained

    torch.manual_seed(0)
    layer = trained(DecoderLayer(dim=64, heads=4, kv_heads=2, hidden=96))
    return capture(layer, [torch.randn(1, 1, 64)])


@pytest.mark.slow
def test_a_captured_layer_reads_its_projections_in_place(tmp_path) -> None:
    module = one_token_decoder_layer()
    assert all(is_alias(op) for op in slices(module))
    offsets = {at for k in generate_triton(module).kernels for at in k.offsets}
    assert {64, 96} <= offsets
    assert_emulation_matches(module, seed=1)
    path = tmp_path / "layer.mlir"
    path.write_text(module_text(module))
    rows = _interpret("file", str(path))
    assert rows and not _failures(rows)
