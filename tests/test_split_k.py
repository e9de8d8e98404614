"""The default partition of skinny matmuls (``lowering/split_k.py``, with
``lowering/norm_prologue.py``): plans for
the decode projections, the kernels default-customize builds (split over K,
residual fused), and what they compute, by our interpreter, by Triton's CPU
interpreter and compiled to sm_90 cubin."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_triton import _failures, _interpret, needs_triton

from mirage_xdsl.dialects import kernel
from mirage_xdsl.gpu_target import H100, H200
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import parse
from mirage_xdsl.lowering.default_customize import DefaultCustomizePass
from mirage_xdsl.lowering.norm_prologue import ROW_TILE
from mirage_xdsl.lowering.split_k import (
    JOINED_STRIPS_PER_SM,
    WEIGHT_TILE_BYTES,
    one_row_block_bytes,
    plan_split_k,
)
from mirage_xdsl.semantics import interpreter
from mirage_xdsl.semantics.inputs import random_inputs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

from bench_projections import NORMED as NORMED_PROJECTIONS  # noqa: E402
from bench_projections import PROJECTIONS, normed_module  # noqa: E402

SPLITS = {
    (2048, 2048): 8,
    (2048, 512): 16,
    (2048, 3072): 8,
    (8192, 2048): 8,
    (4096, 4096): 4,
    (4096, 1024): 16,
    (14336, 4096): 4,
}
"""The projections whose 64-column strips alone are too few (by the model of
``read_seconds``): the split that gives 256 blocks or as many as K allows."""


@pytest.mark.parametrize("rows", [1, 8, 16])
@pytest.mark.parametrize("k, n", PROJECTIONS)
def test_plans_read_whole_lines_and_split_where_strips_are_too_few(
    k: int, n: int, rows: int
) -> None:
    plan = plan_split_k(rows, n, k, 2, H100)
    assert plan.n_tile == 64 and plan.k_tile * 64 * 2 == WEIGHT_TILE_BYTES
    assert plan.splits * plan.forloop * plan.k_tile == k
    assert plan.splits == SPLITS.get((k, n), 1)


@pytest.mark.parametrize("rows", [1, 2, 8, 16])
@pytest.mark.parametrize("k, n", PROJECTIONS)
def test_a_transposed_weight_gets_narrow_strips(k: int, n: int, rows: int) -> None:
    """An ``nn.Linear`` weight, ``[N, K]``, read transposed: its columns are
    contiguous, so a block owns one of them in 2 KB chunks at one row, 4 in
    8 KB chunks at two (16 at more, a ``tl.dot`` tile); a split only where
    the strips give fewer blocks than the GPU has SMs (about)."""
    plan = plan_split_k(rows, n, k, 2, H100, k_major=True)
    width, tile = {1: (1, 2048), 2: (4, 8192)}.get(rows, (16, 8192))
    assert plan.n_tile == width
    assert plan.k_tile * plan.n_tile * 2 == min(tile, k * width * 2)
    assert plan.splits * plan.forloop * plan.k_tile == k
    assert (plan.splits > 1) == (n // plan.n_tile < 128)


@pytest.mark.parametrize(
    "k, n, width, chunk",
    [
        (896, 151936, 4, 896),  # Qwen2.5-0.5B's head: four columns of 1.75 KB
        (896, 9728, 4, 896),
        (1536, 151936, 2, 768),
        (2048, 128256, 1, 1024),  # 4 KB a column: single columns
        (4864, 896, 1, 608),
        (896, 1152, 1, 896),  # joined, too few strips
        (896, 4096, 2, 896),  # 2048 strips of two; of four, 1024: too few
    ],
)
def test_a_short_column_at_one_row_is_joined_by_its_neighbours(k, n, width, chunk):
    """At one row a block owns single columns in 2 KB chunks, unless a whole
    column is under one_row_block_bytes (3.6 KB on an H100): then it owns as
    many (a power of two) as make that much, each chunk as many 2 KB, while
    the strips stay at least JOINED_STRIPS_PER_SM a multiprocessor."""
    plan = plan_split_k(1, n, k, 2, H100, k_major=True)
    assert (plan.n_tile, plan.k_tile) == (width, chunk)
    if width > 1:
        assert n // width >= JOINED_STRIPS_PER_SM * H100.sms


@pytest.mark.parametrize(
    "k, n, width, chunk",
    [
        (2048, 128256, 2, 1024),  # 4 KB a column: pairs on the faster memory
        (896, 151936, 4, 896),  # 1.75 KB: fours, as on an H100
        (8192, 2048, 1, 1024),  # 16 KB a column
        (2048, 2048, 1, 1024),  # pairs would be 1024 strips: too few
    ],
)
def test_one_row_blocks_read_more_on_faster_memory(k, n, width, chunk):
    """An H200's block must read 5.1 KB to be worth its launch
    (one_row_block_bytes follows the memory's bandwidth)."""
    assert one_row_block_bytes(H100) < 4096 < one_row_block_bytes(H200)
    plan = plan_split_k(1, n, k, 2, H200, k_major=True)
    assert (plan.n_tile, plan.k_tile) == (width, chunk)


def test_a_gated_pair_keeps_single_columns_at_one_row():
    """Gate and up read by one kernel already read two columns a block."""
    plan = plan_split_k(1, 4864, 896, 2, H100, k_major=True, weights=2)
    assert (plan.n_tile, plan.k_tile) == (1, 896)


def test_the_split_follows_the_targets_sm_count() -> None:
    small = replace(H100, sms=16)
    assert plan_split_k(1, 2048, 8192, 2, small).splits == 1  # 32 strips: enough
    assert plan_split_k(1, 512, 2048, 2, small).splits == 4  # 8 strips x 4 = 32


def _program(
    rows: tuple[int, ...],
    k: int,
    n: int,
    dtype: str,
    epilogue: str,
    norm: bool = False,
    transposed: bool = False,
) -> str:
    """``x @ w`` then ``epilogue`` (``add``: a residual; ``mul``: times a
    per-column weight, then plus the residual), as kernel ops; with ``norm``,
    ``x`` is ``rms_norm(a) * nw`` (a per-column weight ``[K]``, on the left);
    with ``transposed``, ``w`` is an ``[N, K]`` input's transpose (an
    ``nn.Linear`` weight)."""
    x = "x".join(map(str, (*rows, k)))
    y = "x".join(map(str, (*rows, n)))
    lines = [
        f"%y = kernel.matmul %x, %w : tensor<{x}x{dtype}>, "
        f"tensor<{k}x{n}x{dtype}> -> tensor<{y}x{dtype}>"
    ]
    args = [f"%x: tensor<{x}x{dtype}>", f"%w: tensor<{k}x{n}x{dtype}>"]
    if transposed:
        args[1] = f"%wt: tensor<{n}x{k}x{dtype}>"
        lines[:0] = [
            f"%w = kernel.transpose %wt dims 0, 1 : tensor<{n}x{k}x{dtype}> "
            f"-> tensor<{k}x{n}x{dtype}>"
        ]
    if norm:
        args[0] = f"%a: tensor<{x}x{dtype}>"
        args.append(f"%nw: tensor<{k}x{dtype}>")
        lines[:0] = [
            f"%n = kernel.rms_norm %a eps 1.000000e-05 : tensor<{x}x{dtype}> "
            f"-> tensor<{x}x{dtype}>",
            f"%x = kernel.mul %nw, %n : tensor<{k}x{dtype}>, tensor<{x}x{dtype}> "
            f"-> tensor<{x}x{dtype}>",
        ]
    last = "%y"
    if epilogue == "mul":
        args.append(f"%g: tensor<{n}x{dtype}>")
        lines.append(
            f"%s = kernel.mul %y, %g : tensor<{y}x{dtype}>, "
            f"tensor<{n}x{dtype}> -> tensor<{y}x{dtype}>"
        )
        last = "%s"
    if epilogue in ("add", "mul"):
        args.append(f"%r: tensor<{y}x{dtype}>")
        lines.append(
            f"%o = kernel.add %r, {last} : tensor<{y}x{dtype}>, "
            f"tensor<{y}x{dtype}> -> tensor<{y}x{dtype}>"
        )
        last = "%o"
    body = "\n    ".join(lines)
    return (
        f"func.func @proj({', '.join(args)}) -> tensor<{y}x{dtype}> {{\n    {body}\n"
        f"    func.return {last} : tensor<{y}x{dtype}>\n}}\n"
    )


def _customized(module) -> list[kernel.CustomizedOp]:
    return [op for op in module.walk() if isinstance(op, kernel.CustomizedOp)]


def test_a_down_projection_is_split_over_k_and_its_residual_add_fused() -> None:
    text = _program((1,), 8192, 2048, "f16", "add")
    module = parse(make_context(), text, "down.mlir")
    DefaultCustomizePass().apply(make_context(), module)
    module.verify()
    partial, combine = _customized(module)
    assert partial.grid_dims == (32, 8, 1) and partial.forloop == 8
    assert combine.forloop == 1
    assert [op.name for op in combine.entry.ops][1:-1] == [
        "block.reduce_sum",
        "block.input",
        "block.add",
    ]
    assert not [
        op for op in module.walk() if op.name in ("kernel.add", "kernel.matmul")
    ]


SMALL = [
    ((1,), "f16", "add"),
    ((3,), "bf16", "mul"),
    ((1, 16), "f16", "none"),
    ((4, 1), "f16", "add"),
]
"""Rows (a leading batch dim too), element type and epilogue of the small
split programs: ``K = 4096, N = 256`` splits 32 ways (four strips)."""


@pytest.mark.parametrize("rows, dtype, epilogue", SMALL)
def test_split_programs_compute_what_the_plain_ones_do(rows, dtype, epilogue) -> None:
    text = _program(rows, 4096, 256, dtype, epilogue)
    module = parse(make_context(), text, "proj.mlir")
    xs = random_inputs(module, 0)
    want = interpreter.run(module, xs)
    DefaultCustomizePass().apply(make_context(), module)
    module.verify()
    partial = _customized(module)[0]
    assert partial.grid_dims == (4, 32, 1)
    (got,) = interpreter.run(module, xs)
    assert np.linalg.norm(got - want[0]) <= 1e-5 * np.linalg.norm(want[0])


TRANSPOSED = [
    ((1,), 2048, 512, "add", False, (512, 1, 1)),  # 1 column a block
    ((1,), 1024, 512, "add", False, (512, 1, 1)),  # a 2 KB column, strips too few
    ((1,), 1024, 2112, "add", False, (1056, 1, 1)),  # two 2 KB columns a block
    ((8,), 2048, 256, "mul", False, (16, 8, 1)),  # 16 columns, split 8 ways
    ((1, 2), 512, 64, "none", True, (16, 1, 1)),  # the norm in its kernel
]


@pytest.mark.parametrize("rows, k, n, epilogue, norm, grid", TRANSPOSED)
def test_a_transposed_weight_is_read_in_narrow_strips(
    rows, k, n, epilogue, norm, grid
) -> None:
    """The partial kernel's blocks each own a few rows of the ``[N, K]``
    input (its transpose, a kernel of its own here, is the blocks' load once
    ``fold-transposes`` has run: ``test_triton_runs_the_kernels_of_a_
    transposed_weight``)."""
    text = _program(rows, k, n, "f16", epilogue, norm, transposed=True)
    module = parse(make_context(), text, "linear.mlir")
    xs = random_inputs(module, 0)
    want = interpreter.run(module, xs)
    DefaultCustomizePass().apply(make_context(), module)
    module.verify()
    assert _customized(module)[1].grid_dims == grid  # after the transpose's
    (got,) = interpreter.run(module, xs)
    assert np.linalg.norm(got - want[0]) <= 1e-5 * np.linalg.norm(want[0])


def _gated(rows, k: int, n: int, transposed: bool, norm: bool):
    """``silu(x @ wg) * (x @ wu)``, the weights ``[N, K]`` read transposed or
    ``[K, N]``; with ``norm``, ``x`` is ``rms_norm(a) * nw``."""
    from mirage_xdsl.ir.builder import new_kernel_graph

    g = new_kernel_graph("gated")
    x = g.new_input((*rows, k))
    if norm:
        x = g.mul(g.rms_norm(x, 1e-5), g.new_input((k,)))

    def weight():
        return (
            g.transpose(g.new_input((n, k)), 0, 1)
            if transposed
            else g.new_input((k, n))
        )

    wg, wu = weight(), weight()
    g.mark_output(g.mul(g.silu(g.matmul(x, wg)), g.matmul(x, wu)))
    return g.module()


GATED = [
    ((1,), 1024, 256, True, False),  # 64 blocks of 4 columns of both
    ((8,), 512, 128, True, True),  # 8 blocks of 16, the norm in them too
    ((1,), 2048, 1024, False, False),  # [K, N]: split, so two pairs
]


@pytest.mark.parametrize("rows, k, n, transposed, norm", GATED)
def test_a_gated_mlps_two_projections_are_one_kernel_where_unsplit(
    rows, k, n, transposed, norm
) -> None:
    """The gate and up projections of one input read their weights' strips
    in one kernel, which applies silu and the product; a split plan keeps
    them apart (each its partial sums and combine)."""
    module = _gated(rows, k, n, transposed, norm)
    xs = random_inputs(module, 0)
    want = interpreter.run(module, xs)
    DefaultCustomizePass().apply(make_context(), module)
    module.verify()
    plan = plan_split_k(int(np.prod(rows)), n, k, 2, H100, k_major=transposed)
    kernels = [k for k in _customized(module) if k.forloop >= 1]
    products = [k for k in kernels if "block.matmul" in [o.name for o in k.entry.ops]]
    assert len(products) == (1 if plan.splits == 1 else 2)
    if plan.splits == 1:
        names = [o.name for o in products[0].entry.ops]
        assert names.count("block.matmul") == 2 and "block.silu" in names
    assert not [o for o in module.walk() if o.name in ("kernel.matmul", "kernel.mul")]
    (got,) = interpreter.run(module, xs)
    assert np.linalg.norm(got - want[0]) <= 1e-5 * np.linalg.norm(want[0])


NORMED = [
    ((1,), 4096, 256, "f16", "add"),  # split 32 ways
    ((2,), 4096, 256, "bf16", "mul"),
    ((1, 2), 512, 64, "f16", "none"),  # unsplit: the partial kernel divides
    ((2,), 16384, 256, "f16", "add"),  # rows over ROW_TILE: the combine loops
]


@pytest.mark.parametrize("rows, k, n, dtype, epilogue", NORMED)
def test_an_rmsnorm_making_the_rows_is_computed_in_the_split_kernels(
    rows, k, n, dtype, epilogue
) -> None:
    text = _program(rows, k, n, dtype, epilogue, norm=True)
    module = parse(make_context(), text, "normed.mlir")
    xs = random_inputs(module, 0)
    want = interpreter.run(module, xs)
    DefaultCustomizePass().apply(make_context(), module)
    module.verify()
    kernels = _customized(module)
    split = plan_split_k(int(np.prod(rows)), n, k, 2, H100).splits
    assert len(kernels) == (2 if split > 1 else 1)
    assert not [op for op in module.walk() if op.name.startswith("kernel.rms_norm")]
    assert not [op for op in module.walk() if op.name == "kernel.mul"]
    names = [op.name for op in kernels[-1].entry.ops]
    assert "block.sqrt" in names and "block.div" in names
    if split == 1:  # the squares summed from the chunks loaded for the product
        assert names.count("block.input") == 3  # a, the norm's weight, w
    else:  # the combine sums the squares of a's rows in chunks of ROW_TILE
        assert kernels[-1].forloop == -(-int(np.prod(rows)) * k // ROW_TILE)
    (got,) = interpreter.run(module, xs)
    assert np.linalg.norm(got - want[0]) <= 1e-5 * np.linalg.norm(want[0])


@pytest.mark.parametrize("rows", [(3,), (8,), (1, 16)])
def test_at_more_rows_the_norm_stays_a_kernel_of_its_own(rows) -> None:
    """Past PROLOGUE_ROWS the product is a tl.dot, which would take the
    scaled chunks from registers: the norm is computed apart and the
    projection reads its rows."""
    text = _program(rows, 2048, 256, "f16", "add", norm=True, transposed=True)
    module = parse(make_context(), text, "normed.mlir")
    xs = random_inputs(module, 0)
    want = interpreter.run(module, xs)
    DefaultCustomizePass().apply(make_context(), module)
    module.verify()
    names = [[o.name for o in k.entry.ops] for k in _customized(module)]
    assert any("block.rms_norm" in n for n in names)
    assert not any("block.sqrt" in n for n in names if "block.matmul" in n)
    (got,) = interpreter.run(module, xs)
    assert np.linalg.norm(got - want[0]) <= 1e-5 * np.linalg.norm(want[0])


def test_a_norm_computed_in_fp32_reads_the_narrow_rows() -> None:
    """transformers' RMSNorm: bf16 rows widened to fp32, normalised, narrowed
    again and scaled by the weight. The widening is exact, so the kernels
    read the bf16 rows; neither cast nor the norm is left as a kernel."""
    from mirage_xdsl.ir.builder import bfloat16, float32, new_kernel_graph

    g = new_kernel_graph("hf_norm")
    a, nw = g.new_input((1, 2048), bfloat16), g.new_input((2048,), bfloat16)
    w = g.new_input((2048, 512), bfloat16)
    n = g.cast(g.rms_norm(g.cast(a, float32), 1e-6), bfloat16)
    g.mark_output(g.matmul(g.mul(nw, n), w))
    module = g.module()
    xs = random_inputs(module, 0)
    want = interpreter.run(module, xs)
    DefaultCustomizePass().apply(make_context(), module)
    module.verify()
    assert [op.name for op in module.walk() if op.name.startswith("kernel.")] == [
        "kernel.reshape",  # the weight [2048] as [1, 2048]
        "kernel.customized",
        "kernel.reshape",
        "kernel.reshape",
        "kernel.customized",
        "kernel.reshape",
    ]
    (got,) = interpreter.run(module, xs)
    assert np.linalg.norm(got - want[0]) <= 1e-5 * np.linalg.norm(want[0])


def _normed_twice(returned: bool) -> str:
    """One RMSNorm feeding two projections (gate and up); ``returned``: the
    normalised rows are a result too."""
    t = "tensor<1x1024xf16>"
    out = "tensor<1x128xf16>"
    results = f"{out}, {out}" + (f", {t}" if returned else "")
    values = "%g, %u" + (", %x" if returned else "")
    return f"""
func.func @mlp(%a: {t}, %nw: tensor<1024xf16>, %wg: tensor<1024x128xf16>,
               %wu: tensor<1024x128xf16>) -> ({results}) {{
  %n = kernel.rms_norm %a eps 1.000000e-06 : {t} -> {t}
  %x = kernel.mul %n, %nw : {t}, tensor<1024xf16> -> {t}
  %g = kernel.matmul %x, %wg : {t}, tensor<1024x128xf16> -> {out}
  %u = kernel.matmul %x, %wu : {t}, tensor<1024x128xf16> -> {out}
  func.return {values} : {results}
}}
"""


@pytest.mark.parametrize("returned", [False, True])
def test_a_norm_read_by_two_projections_is_dropped_only_when_nothing_else_reads_it(
    returned: bool,
) -> None:
    module = parse(make_context(), _normed_twice(returned), "mlp.mlir")
    xs = random_inputs(module, 0)
    want = interpreter.run(module, xs)
    DefaultCustomizePass().apply(make_context(), module)
    module.verify()
    blocks = [[o.name for o in op.entry.ops] for op in _customized(module)]
    assert sum("block.matmul" in b for b in blocks) == 2  # each projection's
    assert sum("block.sqrt" in b for b in blocks) == 2  # each divides by the RMS
    assert sum("block.rms_norm" in b for b in blocks) == (1 if returned else 0)
    got = interpreter.run(module, xs)
    for g, w in zip(got, want, strict=True):
        assert np.linalg.norm(g - w) <= 1e-5 * np.linalg.norm(w)


def test_a_norm_of_the_rows_times_themselves_is_no_prologue() -> None:
    """``n * n`` does not scale the rows linearly: the norm stays a kernel."""
    text = _program((1,), 4096, 256, "f16", "none", norm=True).replace(
        "kernel.mul %nw, %n : tensor<4096xf16>",
        "kernel.mul %n, %n : tensor<1x4096xf16>",
    )
    module = parse(make_context(), text, "square.mlir")
    xs = random_inputs(module, 0)
    want = interpreter.run(module, xs)
    DefaultCustomizePass().apply(make_context(), module)
    module.verify()
    assert len(_customized(module)) == 4  # norm, product, partial, combine
    (got,) = interpreter.run(module, xs)
    assert np.linalg.norm(got - want[0]) <= 1e-5 * np.linalg.norm(want[0])


def _trusted(rows: list[dict], dtype: str) -> list[dict]:
    """The interpreter's rows that can be trusted: Triton 3.9's CPU interpreter
    multiplies bf16 ``tl.dot`` operands wrongly (a lone 16 x 16 ``tl.dot`` of
    bf16 tiles is off by 1e10 there), so bf16 kernels are checked in the
    multiply-and-sum form only (and compiled in both)."""
    return [r for r in rows if dtype != "bf16" or r.get("form", "fma") == "fma"]


@pytest.mark.slow
@needs_triton
def test_triton_runs_the_split_kernels(tmp_path: Path) -> None:
    cases = [
        ((1,), 4096, 256, "add", False),
        ((3,), 4096, 256, "mul", False),
        ((1,), 1024, 128, "add", True),  # split 8 ways, the norm in its kernels
        ((2,), 16384, 128, "none", True),  # the combine loops over the rows
    ]
    paths = []
    for i, (shape, k, n, epilogue, norm) in enumerate(cases):
        paths.append(tmp_path / f"p{i}.mlir")
        paths[-1].write_text(_program(shape, k, n, "f16", epilogue, norm))
    rows = _interpret("file", *map(str, paths))  # one interpreter process
    # every case, those of one or two rows in the multiply-and-sum forms too
    assert len(rows) > len(cases)
    assert not _failures(rows)


@needs_triton
@pytest.mark.slow
def test_triton_runs_the_kernels_of_transposed_weights_and_gated_pairs(
    tmp_path: Path,
) -> None:
    """The narrow strips of transposed weights (TRANSPOSED) and a gated MLP's
    two projections in one kernel (GATED), under Triton's interpreter (one
    process)."""
    from mirage_xdsl.ir.printing import module_text

    paths = []
    for i, (rows, k, n, epilogue, norm, _) in enumerate(TRANSPOSED):
        paths.append(tmp_path / f"t{i}.mlir")
        paths[-1].write_text(
            _program(rows, k, n, "f16", epilogue, norm, transposed=True)
        )
    for i, case in enumerate(GATED[:2]):
        paths.append(tmp_path / f"g{i}.mlir")
        paths[-1].write_text(module_text(_gated(*case)))
    rows = _interpret("file", *map(str, paths))
    assert len(rows) >= len(paths) and not _failures(rows)
    paths = paths[: len(TRANSPOSED)]
    from mirage_xdsl.lowering.triton import generate_triton

    # the weight read in place: no kernel copies it transposed
    for path, case in zip(paths, TRANSPOSED, strict=True):
        program = generate_triton(parse(make_context(), path.read_text(), str(path)))
        assert list(program.kernels[0].grid) == list(case[-1])


@needs_triton
@pytest.mark.slow
@pytest.mark.parametrize("k, n", PROJECTIONS)
def test_projections_run_under_triton_and_compile_for_sm_90(
    k: int, n: int, tmp_path: Path
) -> None:
    """Every projection at 1, 8 and 16 rows with a residual add (f16, and
    bf16 at one row): Triton's interpreter against ours, and every form of
    every kernel compiled to an sm_90 cubin within a block's shared memory."""
    from test_triton import _check_compiled, _compile_all_forms

    cases = [((1,), "f16"), ((1,), "bf16"), ((8,), "f16"), ((1, 16), "f16")]
    for i, (rows, dtype) in enumerate(cases):
        text = _program(rows, k, n, dtype, "add")
        path = tmp_path / f"p{i}.mlir"
        path.write_text(text)
        checked = _trusted(_interpret("file", str(path)), dtype)
        assert checked and not _failures(checked)
        for compiled in _compile_all_forms(parse(make_context(), text, str(path))):
            _check_compiled(compiled)


@needs_triton
@pytest.mark.slow
@pytest.mark.parametrize("k, ns", NORMED_PROJECTIONS)
def test_normed_projections_run_under_triton_and_compile_for_sm_90(
    k: int, ns: tuple[int, ...], tmp_path: Path
) -> None:
    """The RMSNorm-fed projections of the 1B and 8B layers at 1 and 16 rows:
    Triton's interpreter against ours, and every form of every kernel
    compiled to an sm_90 cubin within a block's shared memory."""
    from test_triton import _check_compiled, _compile_all_forms

    from mirage_xdsl.ir.printing import module_text

    for rows in (1, 16):
        module = normed_module(rows, k, ns)
        path = tmp_path / f"normed{rows}.mlir"
        path.write_text(module_text(module))
        checked = _interpret("file", str(path))
        assert checked and not _failures(checked)
        for compiled in _compile_all_forms(module):
            _check_compiled(compiled)


def test_the_search_forms_combine_loop_is_unrolled_and_its_dot_loop_is_not() -> None:
    """The split-K combine of examples/gated_mlp_splitk.mlir sums its 4 parts
    in a ``tl.static_range`` (Triton pipelines no loads without a dot, so a
    plain loop would wait for each part in turn); the partial kernel's
    tensor-core loop stays a ``range`` for Triton's pipeline. The cost model
    prices the same decision."""
    from mirage_xdsl.lowering.triton import generate_triton
    from mirage_xdsl.search.cost_model import UNROLL_ELEMENTS, unrolled

    path = Path(__file__).resolve().parent.parent / "examples" / "gated_mlp_splitk.mlir"
    source = generate_triton(parse(make_context(), path.read_text(), str(path))).source
    partial = source[
        source.index("def gated_mlp_k0(") : source.index("def gated_mlp_k0_fma(")
    ]
    combine = source[source.index("def gated_mlp_k1(") : source.index("BUFFERS")]
    assert "for it in range(0, " in partial and "static_range" not in partial
    assert "for it in tl.static_range(0, 4):" in combine
    assert unrolled(4, False, 256) and not unrolled(4, True, 256)
    assert not unrolled(4, False, UNROLL_ELEMENTS // 2) and not unrolled(1, False, 1)


def _printed_form(rows: tuple[int, ...], transposed: bool, form: str) -> str:
    """The ``form`` kernel (``defer``, ``fma``) Triton source of a projection
    of ``rows`` with a residual add, 4096 -> 512."""
    from mirage_xdsl.lowering.triton import generate_triton

    text = _program(rows, 4096, 512, "f16", "add", transposed=transposed)
    source = generate_triton(parse(make_context(), text, "linear.mlir")).source
    start = source.index(f"_{form}(")
    end = source.find("@triton.jit", start)
    return source[start : end if end > 0 else len(source)]


def test_one_row_by_a_transposed_weight_keeps_its_terms_column_by_column() -> None:
    """At one row the ``defer`` form of an ``[N, K]`` weight's product keeps
    ``N x K`` terms, the weight tile's own order, and sums each column's
    once after the loop; at two rows it keeps ``M x K x N``."""
    one = _printed_form((1,), True, "defer")
    assert "tl.zeros([1, 1024], dtype=tl.float32)" in one  # 1 column, 2 KB
    assert "tl.expand_dims(tl.sum(terms" in one and ", axis=1), 0)" in one
    two = _printed_form((2,), True, "defer")
    assert "tl.zeros([2, 1024, 4], dtype=tl.float32)" in two


@pytest.mark.parametrize("transposed", [True, False])
def test_one_row_multiply_and_sum_keeps_two_dimensional_terms(transposed) -> None:
    """The ``fma`` form of one row sums 2-d terms: ``N x K`` of a transposed
    weight tile (summed along its rows), ``K x N`` with the row as a column
    otherwise; never the ``M x K x N`` broadcast."""
    fma = _printed_form((1,), transposed, "fma")
    assert "tl.expand_dims" not in fma.split("# block.matmul")[0].splitlines()[-1]
    assert ("axis=1)" if transposed else "axis=0)") in fma
    assert "* tl.permute(" in fma or "(1, 0)) *" in fma
