"""Slices and concatenations along the last dim inside a row-local segment.

A rotary embedding's ``rotate_half`` (``cat(-x[..., d/2:], x[..., :d/2])``)
moves elements within rows, so the segment around it stays row-local and
becomes one kernel (``search/fusion.py``: each slice a window its
``block.input`` reads, the concatenation a ``block.concat``;
``search/partition.py``: ``row_layouts`` keeps them inside the segment).
Checked here: the rotary captured from plain torch is one kernel that matches
torch in fp32 and fp16 under our interpreter and Triton's, compiles for sm_90
through Triton and CUDA C; the verifier refutes a wrong window; and layout ops
that do not stay within rows still cut the program as before.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_lowering import assert_emulation_matches
from test_triton import _check_compiled, _compile_all_forms, _interpret, needs_triton
from xdsl.dialects import func

from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.lowering import nvrtc
from mirage_xdsl.lowering.cuda import generate_program
from mirage_xdsl.search import work
from mirage_xdsl.search.fusion import row_fused, row_local
from mirage_xdsl.search.partition import Segment, partition
from mirage_xdsl.search.ugraph import BlockInput, from_function, to_module
from mirage_xdsl.semantics.interpreter import entry_function, run
from mirage_xdsl.verify.equivalence import equivalent

torch = pytest.importorskip("torch")
rotary_program = pytest.importorskip("rotary_program")

TOLERANCE = {"f32": 1e-6, "f16": 2e-3}
"""Relative error against torch's fp32 rotary of the same inputs (an fp16
result is rounded once, on the store)."""


def kernel_ops(module) -> list[str]:
    """The op names of a module's (or a function's) body, return left out."""
    fn = module if isinstance(module, func.FuncOp) else entry_function(module)
    return [op.name for op in fn.body.block.ops][:-1]


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.fixture(scope="module", params=["f32", "f16"])
def searched(request):
    """The rotary of plain torch, captured and searched, in each dtype."""
    return request.param, rotary_program.searched(request.param)


def test_a_torch_rotary_is_one_kernel(searched) -> None:
    dtype, fn = searched
    assert "kernel.slice" in str(fn.captured.module)  # what capture gives
    assert kernel_ops(fn.module) == ["kernel.customized"]
    assert equivalent(fn.captured.module, fn.module)


def test_the_kernel_matches_torch_under_the_interpreter(searched) -> None:
    dtype, fn = searched
    xs = rotary_program.example(dtype)
    got = fn(*xs).float().numpy()
    assert rel_error(got, rotary_program.reference(xs).numpy()) < TOLERANCE[dtype]


@needs_triton
def test_the_kernel_matches_torch_under_tritons_interpreter() -> None:
    rows = {r["case"]: r for r in _interpret("rotary", "0")}
    for dtype, tolerance in TOLERANCE.items():
        row = rows[f"rotary {dtype}"]
        assert "error" not in row, row
        assert max(row["errors"]) < tolerance, row


@needs_triton
def test_the_kernel_compiles_for_sm90_through_triton(searched) -> None:
    for compiled in _compile_all_forms(searched[1].module):
        _check_compiled(compiled)


def test_the_cuda_c_kernel_matches_the_interpreter(searched) -> None:
    assert_emulation_matches(searched[1].module)


@pytest.mark.skipif(not nvrtc.available(), reason="NVRTC not installed")
def test_the_cuda_c_kernel_compiles_for_sm90(searched) -> None:
    compiled = nvrtc.compile_cuda(generate_program(searched[1].module).source)
    assert compiled.cubin and ".target sm_90" in compiled.ptx


def rope(dim: int = 3, shape=(1, 8, 1, 64)):
    """``x * cos + rotate_half(x) * sin``, its halves taken along ``dim``."""
    g = new_kernel_graph("rope")
    x = g.new_input(shape)
    cos, sin = g.new_input(shape), g.new_input(shape)
    half = shape[dim] // 2
    low, high = g.slice(x, dim, 0, half), g.slice(x, dim, half, shape[dim])
    turned = g.concat(g.neg(high), low, dim)
    g.mark_output(g.add(g.mul(x, cos), g.mul(turned, sin)))
    return g.module()


def pieces_of(module) -> list:
    """Each piece: a layout op's name, or the op names of a segment."""
    return [
        kernel_ops(p.function) if isinstance(p, Segment) else p.name
        for p in partition(entry_function(module), max_ops=9)
    ]


def test_a_rotation_along_the_last_dim_is_one_segment() -> None:
    assert pieces_of(rope()) == [
        [
            "kernel.slice",
            "kernel.slice",
            "kernel.neg",
            "kernel.concat",
            "kernel.mul",
            "kernel.mul",
            "kernel.add",
        ]
    ]


def test_a_slice_along_another_dim_still_cuts() -> None:
    """Halves of the heads dim: the slices, then the concat, are layout ops
    between three segments, as every layout op was."""
    module = rope(dim=1)
    assert not row_local(from_function(entry_function(module)))
    assert pieces_of(module) == [
        "kernel.slice",
        "kernel.slice",
        ["kernel.neg"],
        "kernel.concat",
        ["kernel.mul", "kernel.mul", "kernel.add"],
    ]


def test_a_slice_nothing_in_its_segment_reads_still_cuts() -> None:
    """A slice only a reshape reads stays a view of its operand: inside the
    segment beside ``y * 2`` it would be a copy the kernel writes."""
    g = new_kernel_graph("view")
    x, y = g.new_input((2, 64)), g.new_input((2, 64))
    g.mark_output(g.mul_scalar(y, 2.0))
    g.mark_output(g.exp(g.reshape(g.slice(x, 1, 0, 32), (2, 2, 16))))
    assert pieces_of(g.module()) == [
        ["kernel.mul_scalar"],
        "kernel.slice",
        "kernel.reshape",
        ["kernel.exp"],
    ]


def test_a_row_too_long_for_shared_memory_still_cuts() -> None:
    """Whole rows of 2^17 fp16 elements do not fit one block's shared memory:
    the fused build cannot be the search's pick, so the layout ops cut."""
    assert pieces_of(rope(shape=(1, 2, 1, 1 << 17))) == [
        "kernel.slice",
        "kernel.slice",
        ["kernel.neg"],
        "kernel.concat",
        ["kernel.mul", "kernel.mul", "kernel.add"],
    ]


def test_slices_of_a_matmuls_result_cut_and_the_concat_after_them_stays() -> None:
    """The slices would join the matmul's segment (with its epilogue
    ``y * cos``), which is not row-local: they cut; the concatenation of the
    halves stays with the row-local ops after it."""
    g = new_kernel_graph("projected")
    x, w = g.new_input((1, 1, 64)), g.new_input((64, 64))
    cos, sin = g.new_input((1, 1, 64)), g.new_input((1, 1, 64))
    y = g.matmul(x, w)
    low, high = g.slice(y, 2, 0, 32), g.slice(y, 2, 32, 64)
    turned = g.concat(g.neg(high), low, 2)
    g.mark_output(g.add(g.mul(y, cos), g.mul(turned, sin)))
    pieces = pieces_of(g.module())
    assert pieces == [
        ["kernel.matmul", "kernel.mul"],
        "kernel.slice",
        "kernel.slice",
        ["kernel.neg", "kernel.concat", "kernel.mul", "kernel.add"],
    ]


def norm_slice():
    """Part of a norm's row, then a row-local tail."""
    g = new_kernel_graph("norm_slice")
    x = g.new_input((4, 64))
    g.mark_output(g.exp(g.slice(g.rms_norm(x), 1, 0, 32)))
    return g.module()


def test_part_of_a_norms_row_is_not_row_local_and_cuts() -> None:
    module = norm_slice()
    ug = from_function(entry_function(module))
    assert not row_local(ug) and row_fused(ug) is None
    assert pieces_of(module) == [["kernel.rms_norm"], "kernel.slice", ["kernel.exp"]]


def windows(module) -> list[tuple[int, int, int] | None]:
    return [op.window_of for op in module.walk() if op.name == "block.input"]


def test_slices_are_pushed_through_element_wise_ops_and_concats() -> None:
    """A window across the joint of a concatenation of computed values reads
    the arguments' windows under each piece and joins them again."""
    g = new_kernel_graph("pushed")
    x, y = g.new_input((2, 3, 32)), g.new_input((2, 3, 1))
    joined = g.concat(g.exp(g.add(x, y)), g.mul_scalar(x, 2.0), 2)
    part = g.slice(joined, 2, 16, 48)
    g.mark_output(g.mul(part, g.slice(g.neg(x), 2, 0, 32)))
    module = g.module()
    ug = from_function(entry_function(module))
    assert row_local(ug)
    fused = to_module(row_fused(ug))  # type: ignore[arg-type]
    assert kernel_ops(fused) == ["kernel.customized"]
    assert sorted(windows(fused), key=str) == sorted(
        [None, None, (2, 0, 16), (2, 16, 32)], key=str
    )
    assert equivalent(module, fused)
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-1, 1, s).astype(np.float32) for s in ((2, 3, 32), (2, 3, 1))]
    np.testing.assert_allclose(run(fused, xs)[0], run(module, xs)[0], rtol=1e-6)


def random_rows(seed: int):
    """A random row-local program over rows [2, 3]: slices and
    concatenations along the last dim among element-wise ops, row sums
    added back and norms (no slice takes part of a norm's row: that cannot
    be fused)."""
    rng = np.random.default_rng(seed)
    g = new_kernel_graph(f"rows_{seed}")
    args = [g.new_input((2, 3, int(rng.choice([8, 16, 24])))) for _ in range(2)]
    values = list(args)
    normed: set = set()
    """Values a norm's whole row went into."""

    def pick(pool):
        return pool[int(rng.integers(len(pool)))]

    for _ in range(int(rng.integers(3, 9))):
        x = pick(values)
        width = x.type.get_shape()[-1]
        kind = int(rng.integers(6))
        whole = [v for v in values if v not in normed and v.type.get_shape()[-1] > 1]
        if kind == 0 and whole:
            x = pick(whole)
            width = x.type.get_shape()[-1]
            start = int(rng.integers(0, width - 1))
            new = g.slice(x, 2, start, int(rng.integers(start + 1, width + 1)))
        elif kind == 1:
            new = g.concat(x, pick(values), 2)
        elif kind == 2:
            new = g.exp(g.mul_scalar(x, 0.1))
        elif kind == 3:
            new = g.mul(x, pick([v for v in values if v.type.get_shape()[-1] == width]))
        elif kind == 4:
            new = g.add(x, g.reduction(x, 2))
        else:
            new = g.rms_norm(x)
            normed.add(new)
        if kind != 0 and any(v in normed for v in new.owner.operands):
            normed.add(new)
        values.append(new)
    for v in values[len(args) :]:
        if not v.uses:
            g.mark_output(v)
    return g.module()


@pytest.mark.parametrize("seed", range(12))
def test_random_row_local_programs_fuse_into_one_equal_kernel(seed: int) -> None:
    module = random_rows(seed)
    fused = row_fused(from_function(entry_function(module)))
    assert fused is not None
    found = to_module(fused)
    assert kernel_ops(found) == ["kernel.customized"]
    assert equivalent(module, found)
    rng = np.random.default_rng(seed)
    xs = [
        rng.uniform(0.5, 1.5, a.type.get_shape()).astype(np.float32)
        for a in entry_function(module).args
    ]
    for got, want in zip(run(found, xs), run(module, xs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_the_verifier_refutes_a_fused_build_reading_the_wrong_window() -> None:
    """The fused build is proved equal to the ops it replaces; the same build
    reading each half of the row from the other half is refuted."""
    module = rope()
    fused = row_fused(from_function(entry_function(module)))
    assert fused is not None and equivalent(module, to_module(fused))
    kernel = fused.ops[0]
    assert kernel.graph is not None

    def swapped(i: BlockInput) -> BlockInput:
        if i.window is None:
            return i
        dim, start, end = i.window
        return replace(i, window=(dim, 64 - end, 64 - start))

    graph = replace(kernel.graph, inputs=tuple(map(swapped, kernel.graph.inputs)))
    wrong = replace(fused, ops=(replace(kernel, graph=graph),))
    assert graph != kernel.graph
    assert not equivalent(module, to_module(wrong))


def test_a_segment_the_generator_cannot_search_weighs_nothing() -> None:
    """Its default builds take no time: its share of the budget goes to the
    segments the generator searches."""
    (rotation,) = partition(entry_function(rope()), 9)
    plain = partition(entry_function(rope(dim=1)), 9)[2]
    assert isinstance(rotation, Segment) and isinstance(plain, Segment)
    assert work(rotation.function) == 0.0
    assert work(plain.function) > 0.0


def two_rotaries(batch: int):
    """The rotary embeddings of a batch's queries (4 heads) and keys (2),
    one program: what a Llama's attention holds between its projections."""
    g = new_kernel_graph("two_rotaries")
    q, k = g.new_input((batch, 4, 8, 16)), g.new_input((batch, 2, 8, 16))
    cos, sin = g.new_input((1, 1, 8, 16)), g.new_input((1, 1, 8, 16))
    for x in (q, k):
        low, high = g.slice(x, 3, 0, 8), g.slice(x, 3, 8, 16)
        turned = g.concat(g.neg(high), low, 3)
        g.mark_output(g.add(g.mul(x, cos), g.mul(turned, sin)))
    return g.module()


@pytest.mark.parametrize("batch", [1, 2])
def test_rotations_of_two_head_counts_are_a_kernel_each(batch: int) -> None:
    """One grid over 4 heads would leave the keys' output unmapped along it
    (a training step's batch of 2 failed its search on it): the queries' and
    the keys' rotations share no op, so each is a kernel over its own rows,
    and the two stay one segment."""
    module = two_rotaries(batch)
    fused = row_fused(from_function(entry_function(module)))
    assert fused is not None and fused.kernels == 2
    grids = {1: [(4, 8, 1), (2, 8, 1)], 2: [(2, 4, 8), (2, 2, 8)]}[batch]
    assert [op.graph.grid for op in fused.ops] == grids  # type: ignore[union-attr]
    assert equivalent(module, to_module(fused)).equivalent
    (segment,) = pieces_of(module)
    assert segment.count("kernel.add") == 2


def broadcast_output_feeding_a_wider_one():
    """``w * 2`` over one head is returned, and scales ``x`` over four."""
    g = new_kernel_graph("broadcast_output")
    x, w = g.new_input((2, 4, 8, 16)), g.new_input((1, 1, 8, 16))
    scaled = g.mul_scalar(w, 2.0)
    g.mark_output(scaled)
    g.mark_output(g.mul(x, scaled))
    return g.module()


def test_an_output_narrower_than_the_grid_is_no_row_fused_kernel() -> None:
    """Its blocks would all write the narrow output: no grid covers both."""
    module = broadcast_output_feeding_a_wider_one()
    assert row_fused(from_function(entry_function(module))) is None
    assert pieces_of(module)


def two_rotations_fused():
    return to_module(row_fused(from_function(entry_function(two_rotaries(2)))))  # type: ignore[arg-type]


def test_two_rotations_as_cuda_c_match_the_interpreter() -> None:
    assert_emulation_matches(two_rotations_fused())


@pytest.mark.skipif(not nvrtc.available(), reason="NVRTC not installed")
def test_two_rotations_compile_for_sm90_through_nvrtc() -> None:
    compiled = nvrtc.compile_cuda(generate_program(two_rotations_fused()).source)
    assert compiled.cubin and ".target sm_90" in compiled.ptx


@needs_triton
def test_two_rotations_compile_for_sm90_through_triton() -> None:
    for compiled in _compile_all_forms(two_rotations_fused()):
        _check_compiled(compiled)
