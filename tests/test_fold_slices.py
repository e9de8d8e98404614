"""A rotary embedding's ``rotate_half``: its slices are read in place by the
kernels that read them (``fold-slices``), and ``q * cos`` joins the segment
of the add that reads it, with the slices (``partition.row_layouts``)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.dialects import kernel
from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.lowering.fold_slices import FoldSlicesPass
from mirage_xdsl.search.partition import Segment, partition
from mirage_xdsl.semantics.interpreter import entry_function


def rotary(heads: int = 4, dim: int = 16) -> ModuleOp:
    """``q * cos + rotate_half(q) * sin`` of a projection's result viewed as
    ``[1, heads, 1, dim]`` (two reshapes, as a decode step's head split)."""
    g = new_kernel_graph("rotary")
    x, w = g.new_input((1, 1, 64)), g.new_input((64, heads * dim))
    cos, sin = g.new_input((1, 1, 1, dim)), g.new_input((1, 1, 1, dim))
    q = g.reshape(g.reshape(g.matmul(x, w), (1, 1, heads, dim)), (1, heads, 1, dim))
    half = dim // 2
    low, high = g.slice(q, 3, 0, half), g.slice(q, 3, half, dim)
    turned = g.concat(g.neg(high), low, 3)
    g.mark_output(g.add(g.mul(q, cos), g.mul(turned, sin)))
    return g.module()


def transposed_slice() -> ModuleOp:
    """A slice of an inner dim read transposed by a matmul (``fold-transposes``
    then ``fold-slices``: the window lands on the swapped dim)."""
    g = new_kernel_graph("transposed_slice")
    x, y = g.new_input((2, 8, 48)), g.new_input((2, 8, 16))
    keys = g.transpose(g.slice(x, 2, 16, 48), 1, 2)
    g.mark_output(g.exp(g.matmul(keys, y)))
    return g.module()


def _ops(module: ModuleOp) -> list[str]:
    return [op.name for op in entry_function(module).body.block.ops]


def test_q_times_cos_joins_the_add_that_reads_it() -> None:
    pieces = partition(entry_function(rotary()), max_ops=9)
    segments = [p for p in pieces if isinstance(p, Segment)]
    last = [op.name for op in segments[-1].function.body.block.ops]
    assert last.count("kernel.mul") == 2 and "kernel.add" in last
    assert len(segments) == 2  # the projection; rotate_half and the products


def test_an_island_read_by_a_layout_op_stays() -> None:
    g = new_kernel_graph("stays")
    x = g.new_input((2, 16))
    y = g.exp(g.reshape(x, (2, 2, 8)))
    g.mark_output(g.transpose(g.mul_scalar(y, 2.0), 1, 2))
    g.mark_output(g.reshape(g.neg(x), (2, 2, 8)))
    pieces = partition(entry_function(g.module()), max_ops=9)
    kinds = [
        [op.name for op in p.function.body.block.ops][:-1]
        if isinstance(p, Segment)
        else p.name
        for p in pieces
    ]
    assert ["kernel.neg"] in kinds  # read by a reshape only: not moved
    assert ["kernel.exp", "kernel.mul_scalar"] in kinds


def test_slices_read_by_kernels_are_no_kernels() -> None:
    module = rotary()
    FoldSlicesPass().apply(make_context(), module)
    module.verify()
    assert "kernel.slice" not in _ops(module)
    windows = [
        op.window_of
        for op in module.walk()
        if op.name == "block.input" and op.window_of is not None
    ]
    assert sorted(windows) == [(3, 0, 8), (3, 8, 16)]


def test_a_returned_slice_or_one_a_reshape_reads_stays_a_kernel() -> None:
    g = new_kernel_graph("kept")
    x = g.new_input((2, 32))
    g.mark_output(g.slice(x, 1, 8, 16))
    g.mark_output(g.reshape(g.slice(x, 1, 16, 32), (2, 2, 8)))
    module = g.module()
    FoldSlicesPass().apply(make_context(), module)
    assert [isinstance(op, kernel.SliceOp) for op in module.walk()].count(True) == 2


@pytest.mark.skipif(
    not all(__import__("importlib").util.find_spec(m) for m in ("triton", "torch")),
    reason="needs triton and torch",
)
@pytest.mark.parametrize("build", [rotary, transposed_slice])
def test_folded_slices_match_the_interpreter_under_triton(
    build, tmp_path: Path
) -> None:
    module = build()
    FoldSlicesPass().apply(make_context(), module)
    assert "kernel.slice" not in _ops(module)
    path = tmp_path / "program.mlir"
    path.write_text(str(build()))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONWARNINGS="ignore")
    script = Path(__file__).with_name("triton_interpret.py")
    done = subprocess.run(
        [sys.executable, str(script), "file", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    rows = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    assert rows, done.stderr[-2000:]
    for row in rows:
        assert "error" not in row, row
        assert max(row["errors"]) < 5e-3, row
