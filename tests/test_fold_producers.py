"""``fold-producers``: a small row-local kernel computed by the kernels that
read it (a decode step's query rotation inside its attention), and where it
keeps its kernel. Checked against our interpreter, and through both backends
(the Triton path runs the pass, the CUDA C path does not)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from backend_checks import BackendChecks, parse_program

from mirage_xdsl.dialects import kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import parse
from mirage_xdsl.lowering import fold_producers
from mirage_xdsl.lowering.fold_producers import FoldProducersPass
from mirage_xdsl.lowering.triton import customized_module
from mirage_xdsl.semantics.interpreter import run
from mirage_xdsl.workloads import random_inputs

FILECHECK = Path(__file__).parent / "filecheck"
ROTATION = FILECHECK / "fold_producers.mlir"
"""A rotation kernel read by an attention kernel through a reshape."""
CHAIN = FILECHECK / "inputs" / "rotary_scores.mlir"
"""The same as plain kernel ops: a kernel per op by default."""


def kernels(module) -> int:
    return sum(isinstance(op, kernel.CustomizedOp) for op in module.walk())


def folded(module):
    out = module.clone()
    FoldProducersPass().apply(make_context(), out)
    out.verify()
    return out


def assert_same_results(a, b) -> None:
    xs = random_inputs(a, 0, -1.0, 1.0)
    for want, got in zip(run(a, xs), run(b, xs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def variant(*replacements: tuple[str, str]):
    """The rotation program with each ``(old, new)`` text replaced."""
    text = ROTATION.read_text()
    for old, new in replacements:
        assert old in text
        text = text.replace(old, new)
    return parse(make_context(), text, "variant.mlir")


def test_the_attention_rotates_the_queries_it_reads() -> None:
    module = parse_program(ROTATION)
    out = folded(module)
    assert kernels(module) == 2 and kernels(out) == 1
    assert_same_results(module, out)


def test_a_plain_rotation_becomes_part_of_its_readers_kernel() -> None:
    """Seven kernels by default (each op, the slices read in place); the
    neg, the concatenation, both products and their sum fold one into the
    next and then into the scores' kernel, with one reshape of the query."""
    module = parse_program(CHAIN)
    out = customized_module(module)
    assert kernels(out) == 2
    assert str(out).count("kernel.reshape") == 1
    assert_same_results(module, out)


def test_a_softmax_of_plain_ops_is_one_kernel() -> None:
    """By default a kernel per op, each element-wise one splitting the rows
    over its grid: the readers compute them tile by tile, and the row
    reductions over whole rows (each row's max once, shared by both reads)."""
    from softmax_program import softmax_module

    module = softmax_module((4, 1024))
    out = customized_module(module)
    assert kernels(out) == 1
    assert str(out).count("block.reduce_max") == 1
    assert_same_results(module, out)


def test_a_returned_result_keeps_its_kernel() -> None:
    both = "tensor<1x2x2x16xf16>, tensor<1x4x1x64xf16>"
    module = variant(
        ("-> tensor<1x2x2x16xf16> {\n  %rot", f"-> ({both}) {{\n  %rot"),
        ("func.return %o : tensor<1x2x2x16xf16>", f"func.return %o, %rot : {both}"),
    )
    assert kernels(folded(module)) == 2


NORM_THEN_PRODUCT = """
func.func @f(%x: tensor<4x64xf16>, %w: tensor<64x16xf16>) -> tensor<4x16xf16> {
  %n = kernel.customized(%x) grid [4, 1, 1] block [128, 1, 1] forloop 1 : (tensor<4x64xf16>) -> tensor<4x64xf16> {
  ^bb0(%a: tensor<4x64xf16>):
    %r = block.input %a imap [0, -1, -1] fmap -1 : tensor<4x64xf16> -> tensor<1x64xf16>
    %m = block.rms_norm %r : tensor<1x64xf16> -> tensor<1x64xf16>
    block.output %m omap [0, -1, -1] : tensor<1x64xf16>
  }
  %o = kernel.customized(%n, %w) grid [1, 1, 1] block [128, 1, 1] forloop 2 : (tensor<4x64xf16>, tensor<64x16xf16>) -> tensor<4x16xf16> {
  ^bb0(%b: tensor<4x64xf16>, %c: tensor<64x16xf16>):
    %tn = block.input %b imap [-1, -1, -1] fmap 1 : tensor<4x64xf16> -> tensor<4x32xf16>
    %tw = block.input %c imap [-1, -1, -1] fmap 0 : tensor<64x16xf16> -> tensor<32x16xf16>
    %p = block.matmul %tn, %tw : tensor<4x32xf16>, tensor<32x16xf16> -> tensor<4x16xf16>
    %s = block.forloop_accum %p reduce "none" : tensor<4x16xf16> -> tensor<4x16xf16>
    block.output %s omap [-1, -1, -1] : tensor<4x16xf16>
  }
  func.return %o : tensor<4x16xf16>
}
"""


def read_once(text: str) -> str:
    """NORM_THEN_PRODUCT's product (or a variant's) loading its operands
    whole, with no for-loop."""
    return (
        text.replace("forloop 2 :", "forloop 1 :")
        .replace(
            "fmap 1 : tensor<4x64xf16> -> tensor<4x32xf16>",
            "fmap -1 : tensor<4x64xf16> -> tensor<4x64xf16>",
        )
        .replace(
            "fmap 0 : tensor<64x16xf16> -> tensor<32x16xf16>",
            "fmap -1 : tensor<64x16xf16> -> tensor<64x16xf16>",
        )
        .replace(
            "tensor<4x32xf16>, tensor<32x16xf16>", "tensor<4x64xf16>, tensor<64x16xf16>"
        )
    )


def test_a_reader_that_splits_the_rows_keeps_the_producer() -> None:
    """The product walks the normalised rows (its contraction dim) in two
    for-loop iterations: no block holds whole rows to normalise."""
    module = parse(make_context(), NORM_THEN_PRODUCT, "norm.mlir")
    out = folded(module)
    assert kernels(out) == 2
    assert_same_results(module, out)


def weighted(weight: str, tile: str) -> str:
    """NORM_THEN_PRODUCT read once, its norm times ``weight`` loaded whole
    as ``tile``."""
    return read_once(
        NORM_THEN_PRODUCT.replace(
            "%x: tensor<4x64xf16>, %w", f"%x: tensor<4x64xf16>, %g: {weight}, %w"
        )
        .replace(
            "kernel.customized(%x) grid [4, 1, 1] block [128, 1, 1] forloop 1 : "
            "(tensor<4x64xf16>)",
            "kernel.customized(%x, %g) grid [4, 1, 1] block [128, 1, 1] forloop 1 : "
            f"(tensor<4x64xf16>, {weight})",
        )
        .replace(
            "^bb0(%a: tensor<4x64xf16>):",
            f"^bb0(%a: tensor<4x64xf16>, %ga: {weight}):\n"
            f"    %tg = block.input %ga imap [-1, -1, -1] fmap -1 : {weight} -> {tile}",
        )
        .replace(
            "block.output %m omap",
            f"%mg = block.mul %m, %tg : tensor<1x64xf16>, {tile} -> "
            "tensor<1x64xf16>\n    block.output %mg omap",
        )
    )


def test_a_norm_with_its_weight_becomes_part_of_the_product() -> None:
    """The weight has only the last dim: every block reads it whole."""
    module = parse(
        make_context(),
        weighted("tensor<64xf16>", "tensor<1x64xf16>"),
        "weighted.mlir",
    )
    out = folded(module)
    assert kernels(module) == 2 and kernels(out) == 1
    assert "tensor<64xf16> -> tensor<1x64xf16>" in str(out)
    assert_same_results(module, out)


def test_a_producer_reading_a_0d_tensor_keeps_its_kernel() -> None:
    """A scalar tensor (an embedding's scale) has no last dim for a
    reader's tile: the producer reading it stays (the pass raised an
    IndexError on it)."""
    module = parse(
        make_context(), weighted("tensor<f16>", "tensor<1x1xf16>"), "scaled.mlir"
    )
    out = folded(module)
    assert kernels(out) == 2
    assert_same_results(module, out)


def test_a_product_loop_reads_what_the_producer_stored() -> None:
    """An element-wise producer (an exp) folds into a product that reads its
    tile once, but not into one whose for-loop walks it: the loop's loads
    feed the product, and the tl.dot form pipelines only loads that do so
    directly (checked to fail with the rule taken out of ``_plain``)."""
    exp = NORM_THEN_PRODUCT.replace("block.rms_norm %r", "block.exp %r")
    looped = parse(make_context(), exp, "looped.mlir")
    assert kernels(folded(looped)) == 2
    once = parse(
        make_context(),
        read_once(exp),
        "once.mlir",
    )
    out = folded(once)
    assert kernels(out) == 1
    assert_same_results(once, out)


SPLIT_SUM = """
func.func @f(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %p = kernel.customized(%x) grid [4, 2, 1] block [128, 1, 1] forloop 1 : (tensor<4x64xf32>) -> tensor<4x64xf32> {
  ^bb0(%a: tensor<4x64xf32>):
    %t = block.input %a imap [0, 1, -1] fmap -1 : tensor<4x64xf32> -> tensor<1x32xf32>
    %s = block.reduce_sum %t dim 1 : tensor<1x32xf32> -> tensor<1x1xf32>
    %r = block.add %t, %s : tensor<1x32xf32>, tensor<1x1xf32> -> tensor<1x32xf32>
    block.output %r omap [0, 1, -1] : tensor<1x32xf32>
  }
  %o = kernel.customized(%p) grid [4, 1, 1] block [128, 1, 1] forloop 1 : (tensor<4x64xf32>) -> tensor<4x64xf32> {
  ^bb0(%b: tensor<4x64xf32>):
    %u = block.input %b imap [0, -1, -1] fmap -1 : tensor<4x64xf32> -> tensor<1x64xf32>
    %e = block.exp %u : tensor<1x64xf32> -> tensor<1x64xf32>
    block.output %e omap [0, -1, -1] : tensor<1x64xf32>
  }
  func.return %o : tensor<4x64xf32>
}
"""


def test_a_sum_over_each_blocks_part_of_its_rows_keeps_its_kernel() -> None:
    """The producer's blocks each sum half a row: a reader holding whole
    rows would sum whole rows instead."""
    module = parse(make_context(), SPLIT_SUM, "split.mlir")
    out = folded(module)
    assert kernels(out) == 2
    assert_same_results(module, out)


def test_a_row_sum_read_through_a_reshape_of_another_rank_sums_the_last_dim() -> None:
    """The rows reach the reader as ``[2, 2, 64]``: the folded sum is over its
    last dim, not the producer's dim 1."""
    module = parse(
        make_context(),
        """
func.func @f(%x: tensor<4x64xf32>) -> tensor<2x2x64xf32> {
  %m = kernel.reduce_sum %x dim 1 : tensor<4x64xf32> -> tensor<4x1xf32>
  %s = kernel.div %x, %m : tensor<4x64xf32>, tensor<4x1xf32> -> tensor<4x64xf32>
  %g = kernel.reshape %s : tensor<4x64xf32> -> tensor<2x2x64xf32>
  %o = kernel.neg %g : tensor<2x2x64xf32> -> tensor<2x2x64xf32>
  func.return %o : tensor<2x2x64xf32>
}
""",
        "reshaped.mlir",
    )
    out = customized_module(module)
    assert kernels(out) == 1
    (sum_,) = [op for op in out.walk() if op.name == "block.reduce_sum"]
    assert sum_.dim.value.data == 2
    assert_same_results(module, out)


def test_a_fold_that_fails_for_one_reader_leaves_the_others_untouched() -> None:
    """The second reader of ``%p`` transposes its tile, which no fold
    rebuilds: ``%p`` stays, and the first reader built for it is dropped,
    so ``%q`` still folds into the first reader."""
    module = parse(
        make_context(),
        """
func.func @f(%x: tensor<4x64xf32>, %y: tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64x4xf32>) {
  %p = kernel.customized(%x) grid [4, 1, 1] block [128, 1, 1] forloop 1 : (tensor<4x64xf32>) -> tensor<4x64xf32> {
  ^bb0(%a: tensor<4x64xf32>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<4x64xf32> -> tensor<1x64xf32>
    %e = block.exp %t : tensor<1x64xf32> -> tensor<1x64xf32>
    block.output %e omap [0, -1, -1] : tensor<1x64xf32>
  }
  %q = kernel.customized(%y) grid [4, 1, 1] block [128, 1, 1] forloop 1 : (tensor<4x64xf32>) -> tensor<4x64xf32> {
  ^bb0(%a: tensor<4x64xf32>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<4x64xf32> -> tensor<1x64xf32>
    %e = block.neg %t : tensor<1x64xf32> -> tensor<1x64xf32>
    block.output %e omap [0, -1, -1] : tensor<1x64xf32>
  }
  %r2 = kernel.customized(%p) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<4x64xf32>) -> tensor<64x4xf32> {
  ^bb0(%b: tensor<4x64xf32>):
    %u = block.input %b imap [-1, -1, -1] fmap -1 : tensor<4x64xf32> -> tensor<4x64xf32>
    %w = block.transpose %u dims 0, 1 : tensor<4x64xf32> -> tensor<64x4xf32>
    block.output %w omap [-1, -1, -1] : tensor<64x4xf32>
  }
  %r1 = kernel.customized(%p, %q) grid [4, 1, 1] block [128, 1, 1] forloop 1 : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32> {
  ^bb0(%b: tensor<4x64xf32>, %c: tensor<4x64xf32>):
    %u = block.input %b imap [0, -1, -1] fmap -1 : tensor<4x64xf32> -> tensor<1x64xf32>
    %v = block.input %c imap [0, -1, -1] fmap -1 : tensor<4x64xf32> -> tensor<1x64xf32>
    %w = block.add %u, %v : tensor<1x64xf32>, tensor<1x64xf32> -> tensor<1x64xf32>
    block.output %w omap [0, -1, -1] : tensor<1x64xf32>
  }
  func.return %r1, %r2 : tensor<4x64xf32>, tensor<64x4xf32>
}
""",
        "two_readers.mlir",
    )
    out = folded(module)
    assert kernels(out) == 3
    assert_same_results(module, out)


SCALARS = """
func.func @f(%x: tensor<1x1xf32>) -> tensor<f32> {
  %p = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<1x1xf32>) -> tensor<1x1xf32> {
  ^bb0(%a: tensor<1x1xf32>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<1x1xf32> -> tensor<1x1xf32>
    %e = block.neg %t : tensor<1x1xf32> -> tensor<1x1xf32>
    block.output %e omap [-1, -1, -1] : tensor<1x1xf32>
  }
  %s = kernel.reshape %p : tensor<1x1xf32> -> tensor<f32>
  %q = kernel.customized(%s) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<f32>) -> tensor<f32> {
  ^bb0(%b: tensor<f32>):
    %u = block.input %b imap [-1, -1, -1] fmap -1 : tensor<f32> -> tensor<f32>
    %e = block.neg %u : tensor<f32> -> tensor<f32>
    block.output %e omap [-1, -1, -1] : tensor<f32>
  }
  %o = kernel.customized(%q) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<f32>) -> tensor<f32> {
  ^bb0(%b: tensor<f32>):
    %u = block.input %b imap [-1, -1, -1] fmap -1 : tensor<f32> -> tensor<f32>
    %e = block.exp %u : tensor<f32> -> tensor<f32>
    block.output %e omap [-1, -1, -1] : tensor<f32>
  }
  func.return %o : tensor<f32>
}
"""


def test_scalars_have_no_rows_and_keep_their_kernels() -> None:
    module = parse(make_context(), SCALARS, "scalars.mlir")
    out = folded(module)
    assert kernels(out) == 3
    assert_same_results(module, out)


def test_a_producer_whose_inputs_its_readers_would_load_too_often_stays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two blocks load their 2 rows of 64 of the query three times (whole,
    and each half for the rotation), and cos and sin: 768 elements."""
    module = parse_program(ROTATION)
    monkeypatch.setattr(fold_producers, "MOST_ELEMENTS", 767)
    assert kernels(folded(module)) == 2
    monkeypatch.setattr(fold_producers, "MOST_ELEMENTS", 768)
    assert kernels(folded(module)) == 1


def test_a_producer_storing_another_type_keeps_its_kernel() -> None:
    """A cast is a kernel whose store converts: its readers' tiles hold the
    stored type, which the producer's block graph does not compute. The
    program's four casts keep their kernels; its RMSNorm, the product with
    the weight and the exp do not: each is computed by the kernel reading it,
    a cast among them (whose tile holds what they compute, before it stores
    another type)."""
    from mirage_xdsl.lowering.default_customize import DefaultCustomizePass

    module = parse_program(FILECHECK / "inputs" / "cast.mlir")
    plain = module.clone()
    DefaultCustomizePass().apply(make_context(), plain)
    out = folded(plain)

    def casts(m) -> int:
        return sum(
            isinstance(op, kernel.CustomizedOp)
            and t.element_type(op.results[0])
            != t.element_type(op.entry.last_op.operands[0])
            for op in m.walk()
        )

    assert casts(plain) == casts(out) == 4
    assert kernels(out) == kernels(plain) - 3
    assert_same_results(module, out)


class TestBackends(BackendChecks):
    PROGRAMS = (ROTATION, CHAIN)
