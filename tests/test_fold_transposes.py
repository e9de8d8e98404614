"""``fold-transposes`` and ``block.input``'s ``transpose``: kernels read a
transposed tensor in place.

The fold keeps the interpreter's result; the property survives printing,
parsing and the search's µGraph form; a fused attention reading its key cache
transposed runs right in both backends (Triton's CPU interpreter, the CUDA C
emulator) and compiles for sm_90 (Triton, NVRTC); the decode layer's Triton
program launches no transpose kernel for its key cache.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_cuda_compile import check_program, needs_nvrtc
from test_lowering import assert_emulation_matches
from test_triton import (
    _check_compiled,
    _compile_all_forms,
    _failures,
    _interpret,
    needs_triton,
)

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import MirageError, parse, verify
from mirage_xdsl.lowering.cuda import generate_program
from mirage_xdsl.lowering.fold_transposes import FoldTransposesPass
from mirage_xdsl.lowering.triton import generate_triton
from mirage_xdsl.search import ugraph
from mirage_xdsl.semantics import interpreter
from mirage_xdsl.semantics.inputs import random_inputs

ATTENTION = """
func.func @attention(%q: tensor<1x2x4x64xf16>, %k: tensor<1x2x128x64xf16>,
    %v: tensor<1x2x128x64xf16>) -> tensor<1x2x4x64xf16> {
  %kt = kernel.transpose %k dims 2, 3 : tensor<1x2x128x64xf16> -> tensor<1x2x64x128xf16>
  %o = kernel.customized(%q, %kt, %v) grid [2, 1, 1] block [128, 1, 1] forloop 4
      : (tensor<1x2x4x64xf16>, tensor<1x2x64x128xf16>, tensor<1x2x128x64xf16>)
      -> tensor<1x2x4x64xf16> {
  ^bb0(%a: tensor<1x2x4x64xf16>, %b: tensor<1x2x64x128xf16>, %c: tensor<1x2x128x64xf16>):
    %tq = block.input %a imap [1, -1, -1] fmap -1 : tensor<1x2x4x64xf16> -> tensor<1x1x4x64xf16>
    %tk = block.input %b imap [1, -1, -1] fmap 3 : tensor<1x2x64x128xf16> -> tensor<1x1x64x32xf16>
    %tv = block.input %c imap [1, -1, -1] fmap 2 : tensor<1x2x128x64xf16> -> tensor<1x1x32x64xf16>
    %s = block.matmul %tq, %tk : tensor<1x1x4x64xf16>, tensor<1x1x64x32xf16> -> tensor<1x1x4x32xf16>
    %e = block.exp %s : tensor<1x1x4x32xf16> -> tensor<1x1x4x32xf16>
    %p = block.matmul %e, %tv : tensor<1x1x4x32xf16>, tensor<1x1x32x64xf16> -> tensor<1x1x4x64xf16>
    %num = block.forloop_accum %p reduce "none" : tensor<1x1x4x64xf16> -> tensor<1x1x4x64xf16>
    %den = block.forloop_accum %e reduce "sum" : tensor<1x1x4x32xf16> -> tensor<1x1x4x1xf16>
    %r = block.div %num, %den : tensor<1x1x4x64xf16>, tensor<1x1x4x1xf16> -> tensor<1x1x4x64xf16>
    block.output %r omap [1, -1, -1] : tensor<1x1x4x64xf16>
  }
  func.return %o : tensor<1x2x4x64xf16>
}
"""
"""A fused decode attention whose key operand is ``k.transpose(2, 3)``: the
for-loop walks the keys, the last dim of the transposed view."""

SCORES = """
func.func @scores(%q: tensor<2x3x8x40xf16>, %k: tensor<2x3x24x40xf16>)
    -> tensor<2x3x8x24xf16> {
  %kt = kernel.transpose %k dims 2, 3 : tensor<2x3x24x40xf16> -> tensor<2x3x40x24xf16>
  %s = kernel.matmul %q, %kt : tensor<2x3x8x40xf16>, tensor<2x3x40x24xf16> -> tensor<2x3x8x24xf16>
  func.return %s : tensor<2x3x8x24xf16>
}
"""
"""A bare matmul reading a transpose, of extents Triton pads."""

TRANSPOSED_COPY = """
func.func @copy(%x: tensor<8x16xf16>) -> tensor<8x8xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1
      : (tensor<8x16xf16>) -> tensor<8x8xf16> {
  ^bb0(%a: tensor<8x16xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 transpose [0, 1] window [0, 4, 12]
        : tensor<8x16xf16> -> tensor<4x8xf16>
    block.output %t omap [0, -1, -1] : tensor<4x8xf16>
  }
  func.return %o : tensor<8x8xf16>
}
"""
"""Rows 4 to 12 of the transpose of ``x``, two blocks of four rows: the
window counts the dims of the transposed view."""

PROGRAMS = {"attention": ATTENTION, "scores": SCORES}
"""Programs with a ``kernel.transpose`` the fold removes."""
READS = {**PROGRAMS, "copy": TRANSPOSED_COPY}
"""Those and a block graph written with a transposed, windowed read."""


def _module(text: str):
    return parse(make_context(), text, "test")


def _folded(text: str):
    module = _module(text)
    FoldTransposesPass().apply(make_context(), module)
    module.verify()
    return module


def _transposes(module) -> list:
    return [o for o in module.walk() if isinstance(o, kernel.TransposeOp)]


def _cache_transposes(module) -> list:
    """The transposes of 4-d values (a key cache's); the others are of
    ``nn.Linear`` weights, read in place by the projections as well."""
    return [o for o in _transposes(module) if len(o.result.type.get_shape()) == 4]


def _swapped_inputs(module) -> list:
    return [
        o
        for o in module.walk()
        if isinstance(o, block.InputOp) and o.swapped_dims is not None
    ]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("seed", [0, 1])
def test_the_fold_keeps_the_interpreters_result(name: str, seed: int) -> None:
    plain = _module(PROGRAMS[name])
    folded = _folded(PROGRAMS[name])
    assert _transposes(plain) and not _transposes(folded)
    assert all(o.swapped_dims == (2, 3) for o in _swapped_inputs(folded))
    xs = random_inputs(plain, seed)
    want = interpreter.run(plain, xs)
    got = interpreter.run(folded, xs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_a_transposed_input_reads_the_swapped_elements() -> None:
    module = _module(TRANSPOSED_COPY)
    x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    (got,) = interpreter.run(module, [x])
    np.testing.assert_array_equal(got, x.T[4:12])


def test_the_finite_field_verifier_sees_the_fold_and_the_swap() -> None:
    """The folded attention is equivalent to the program; a square copy read
    transposed is not the plain copy."""
    from mirage_xdsl.verify.equivalence import equivalent

    assert equivalent(_module(ATTENTION), _folded(ATTENTION), seed=1)
    copy = """
func.func @copy(%x: tensor<8x8xf16>) -> tensor<8x8xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1
      : (tensor<8x8xf16>) -> tensor<8x8xf16> {
  ^bb0(%a: tensor<8x8xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 SWAP: tensor<8x8xf16> -> tensor<4x8xf16>
    block.output %t omap [0, -1, -1] : tensor<4x8xf16>
  }
  func.return %o : tensor<8x8xf16>
}
"""
    plain = _module(copy.replace("SWAP", ""))
    swapped = _module(copy.replace("SWAP", "transpose [0, 1] "))
    verdict = equivalent(plain, swapped, seed=1)
    assert not verdict and "differs" in verdict.reason


def _transposed_reads(text: str) -> list[str]:
    """The maps, properties and types of each transposed ``block.input``."""
    return [
        line[line.index(" imap ") :]
        for line in text.splitlines()
        if " transpose [" in line
    ]


@pytest.mark.parametrize("name", sorted(READS))
def test_the_property_round_trips_through_text_and_the_search(name: str) -> None:
    text = str(_folded(READS[name]))
    assert _transposed_reads(text)
    again = _module(text)
    assert str(again) == text
    fn = next(iter(again.ops))
    rebuilt = ugraph.to_module(ugraph.from_function(fn))  # type: ignore[arg-type]
    rebuilt.verify()
    assert _transposed_reads(str(rebuilt)) == _transposed_reads(text)
    xs = random_inputs(again, 3)
    for g, w in zip(
        interpreter.run(rebuilt, xs), interpreter.run(again, xs), strict=True
    ):
        np.testing.assert_array_equal(g, w)


def test_a_bad_transpose_is_one_line() -> None:
    text = str(_folded(ATTENTION)).replace("transpose [2, 3]", "transpose [3, 3]")
    with pytest.raises(MirageError) as e:
        verify(_module(text))
    message = str(e.value)
    assert "block.input" in message and "two distinct dims" in message
    assert len(message.strip().splitlines()) == 1


def test_what_the_fold_leaves() -> None:
    """A returned transpose, one a reshape reads, one whose reader's tiles
    would hold less than a sector of each source row, and one whose reader
    already reads a transposed view stay kernels."""
    module = _module(
        """
func.func @kept(%x: tensor<8x16xf16>) -> (tensor<16x8xf16>, tensor<128xf16>) {
  %t = kernel.transpose %x dims 0, 1 : tensor<8x16xf16> -> tensor<16x8xf16>
  %u = kernel.transpose %x dims 0, 1 : tensor<8x16xf16> -> tensor<16x8xf16>
  %r = kernel.reshape %u : tensor<16x8xf16> -> tensor<128xf16>
  %n = kernel.neg %r : tensor<128xf16> -> tensor<128xf16>
  func.return %t, %n : tensor<16x8xf16>, tensor<128xf16>
}
"""
    )
    FoldTransposesPass().apply(make_context(), module)
    assert len(_transposes(module)) == 2 and not _swapped_inputs(module)
    narrow = _module(
        """
func.func @narrow(%k: tensor<1x2x128x64xf16>) -> tensor<1x2x64x64xf16> {
  %kt = kernel.transpose %k dims 2, 3 : tensor<1x2x128x64xf16> -> tensor<1x2x64x128xf16>
  %w = kernel.slice %kt dim 3 start 64 end 128
      : tensor<1x2x64x128xf16> -> tensor<1x2x64x64xf16>
  func.return %w : tensor<1x2x64x64xf16>
}
"""
    )  # the slice's tiles hold 4 elements (8 bytes) of each row of %k
    FoldTransposesPass().apply(make_context(), narrow)
    assert len(_transposes(narrow)) == 1 and not _swapped_inputs(narrow)
    twice = _module(
        """
func.func @twice(%k: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %kt = kernel.transpose %k dims 0, 1 : tensor<4x8xf16> -> tensor<8x4xf16>
  %o = kernel.customized(%kt) grid [1, 1, 1] block [128, 1, 1] forloop 1
      : (tensor<8x4xf16>) -> tensor<4x8xf16> {
  ^bb0(%a: tensor<8x4xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 transpose [0, 1]
        : tensor<8x4xf16> -> tensor<4x8xf16>
    block.output %t omap [-1, -1, -1] : tensor<4x8xf16>
  }
  func.return %o : tensor<4x8xf16>
}
"""
    )
    FoldTransposesPass().apply(make_context(), twice)
    assert len(_transposes(twice)) == 1


@needs_triton
@pytest.mark.parametrize("name", sorted(READS))
def test_triton_reads_the_operand_transposed_and_compiles(name: str) -> None:
    """No transpose kernel: the tile is loaded in the source's memory order
    (whole runs of its contiguous dim) and permuted in registers; every form
    compiles for sm_90."""
    module = _module(READS[name])
    source = generate_triton(module).source
    assert "block.transpose" not in source and " transpose [" in source
    if name == "attention":
        assert source.count("@triton.jit") == 2  # one kernel, dot and fma forms
        # read in memory order (the head dim contiguous), permuted after
        assert (
            "(it * 32 + tl.arange(0, 32)[None, None, :, None]) * 64 + "
            "tl.arange(0, 64)[None, None, None, :], "
            "eviction_policy='evict_first'), (0, 1, 3, 2))" in source
        )
    for compiled in _compile_all_forms(module):
        _check_compiled(compiled)


@needs_triton
@pytest.mark.parametrize(
    "name",
    [n if n == "attention" else pytest.param(n, marks=pytest.mark.slow) for n in READS],
)
def test_triton_interpreter_runs_the_folded_program_right(
    name: str, tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.mlir"
    path.write_text(READS[name])
    rows = _interpret("file", str(path))
    assert rows and not _failures(rows)


@pytest.mark.parametrize("name", sorted(READS))
def test_cuda_c_reads_a_transposed_input(name: str) -> None:
    """CUDA C keeps its transpose kernels (the fold is Triton's), but a block
    graph reading its input transposed lowers and runs right (emulated)."""
    assert_emulation_matches(_folded(READS[name]), seed=2)


@needs_nvrtc
def test_cuda_c_transposed_read_compiles() -> None:
    check_program(generate_program(_folded(ATTENTION)))


def test_the_decode_layers_key_cache_is_read_in_place() -> None:
    """The captured decode layer multiplies by ``k_cache.transpose(2, 3)``;
    its Triton program reads the cache transposed and launches no transpose
    kernel, and computes what the captured program computes."""
    torch = pytest.importorskip("torch")
    from mirage_xdsl.torch.capture import capture_program
    from mirage_xdsl.torch.models import DecodeLayer, trained

    layer = trained(DecodeLayer(dim=64, heads=4, kv_heads=2, hidden=128)).half()
    x = torch.randn(1, 1, 64).half()
    k, v = layer.cache(1, 32)
    module = capture_program(layer, [x, k, v]).module
    (t,) = _cache_transposes(module)
    assert not isinstance(t.input.owner, kernel.TransposeOp)  # the cache itself
    source = generate_triton(module).source
    assert "block.transpose" not in source
    assert source.count("transpose [2, 3]") >= 1
    folded = module.clone()
    FoldTransposesPass().apply(make_context(), folded)
    xs = random_inputs(module, 0)
    for g, w in zip(
        interpreter.run(folded, xs), interpreter.run(module, xs), strict=True
    ):
        # the same sums, the weights' read from transposed views (numpy may
        # add them in another order)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * np.abs(w).max())


@pytest.mark.slow
def test_the_searched_decode_layer_reads_its_key_cache_in_place() -> None:
    """The search keeps ``k_cache.transpose(2, 3)`` between segments, read by
    the attention's customized kernel; the Triton program reads the cache
    transposed instead of launching a transpose kernel."""
    torch = pytest.importorskip("torch")
    from mirage_xdsl.torch import superoptimize
    from mirage_xdsl.torch.models import DecodeLayer, trained

    layer = trained(DecodeLayer(dim=64, heads=4, kv_heads=2, hidden=128)).half()
    x = torch.randn(1, 1, 64).half()
    k, v = layer.cache(1, 32)
    with torch.no_grad():
        found = superoptimize(
            layer, [x, k, v], budget=6, jobs=1, cache_dir="none", measure=None
        )
    (t,) = _cache_transposes(found.module)
    assert all(isinstance(u.operation, kernel.CustomizedOp) for u in t.result.uses)
    source = generate_triton(found.module).source
    assert "block.transpose" not in source and "transpose [2, 3]" in source


@pytest.mark.slow
def test_the_benchmark_compares_both_lowerings_without_a_gpu(tmp_path: Path) -> None:
    """``tools/bench_fold_transposes.py --dry-run``: the searched attention
    lowers to one kernel fewer when it reads the cache in place."""
    pytest.importorskip("torch")
    import json
    import subprocess
    import sys

    tool = Path(__file__).resolve().parent.parent / "tools" / "bench_fold_transposes.py"
    args = ["--keys", "256", "--heads", "8", "--kv-heads", "2", "--batch", "1"]
    subprocess.run(
        [sys.executable, str(tool), *args, "--budget", "5", "--dry-run"]
        + ["--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    (row,) = json.loads((tmp_path / "fold_transposes.json").read_text())
    assert row["transposes_in_ugraph"] == 1
    kernels = row["kernels"]
    assert kernels["read in place"] == kernels["transpose kernel"] - 1
