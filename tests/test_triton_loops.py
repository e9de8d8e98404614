"""How a kernel's for-loop is written: unrolled for the program built to run,
partly unrolled for the candidates measured selection compiles."""

from __future__ import annotations

from pathlib import Path

from test_triton import _check_compiled, needs_triton

from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import parse
from mirage_xdsl.lowering.triton import generate_triton
from mirage_xdsl.lowering.triton_loops import ROLLED_UNROLL, loop_range, rolled_loops

SPLIT_K = Path(__file__).resolve().parent.parent / "examples" / "gated_mlp_splitk.mlir"


def _module():
    return parse(make_context(), SPLIT_K.read_text(), str(SPLIT_K))


def _kernels(source: str) -> tuple[str, str]:
    partial = source[
        source.index("def gated_mlp_k0(") : source.index("def gated_mlp_k0_fma(")
    ]
    return partial, source[source.index("def gated_mlp_k1(") : source.index("BUFFERS")]


def test_within_rolled_loops_an_unrolled_loop_is_unrolled_in_part() -> None:
    """The split-K combine's 4-part loop is a ``tl.static_range`` as built to
    run and a ``tl.range`` unrolled by at most :data:`ROLLED_UNROLL` within
    :func:`rolled_loops`; the tensor-core loop is Triton's ``range`` both
    ways, and leaving the context restores the unrolled form."""
    partial, combine = _kernels(generate_triton(_module()).source)
    with rolled_loops():
        rolled_partial, rolled_combine = _kernels(generate_triton(_module()).source)
    assert "for it in tl.static_range(0, 4):" in combine
    assert "for it in tl.range(0, 4, loop_unroll_factor=4):" in rolled_combine
    assert "static_range" not in rolled_combine
    assert rolled_partial == partial and "for it in range(0, " in partial
    assert "static_range" in _kernels(generate_triton(_module()).source)[1]


def test_a_long_loop_is_unrolled_by_the_rolled_factor() -> None:
    with rolled_loops():
        assert loop_range(64, True) == (
            f"tl.range(0, 64, loop_unroll_factor={ROLLED_UNROLL})"
        )
        assert loop_range(64, False) == "range(0, 64)"
    assert loop_range(64, True) == "tl.static_range(0, 64)"


@needs_triton
def test_the_rolled_forms_compile_for_sm90() -> None:
    from mirage_xdsl.runtime.triton_backend import compile_triton, lower_triton

    with rolled_loops():
        program = lower_triton(_module())
    assert "loop_unroll_factor" in program.source
    forms = max(len(k.variants) for k in program.kernels)
    for form in range(forms):
        _check_compiled(compile_triton(program, tune=False, form=form))


def test_a_rolled_loop_loads_ahead_only_tiles_that_fit_twice(monkeypatch) -> None:
    """Loads one iteration ahead hold two iterations' tiles in registers: a
    loop of more than :data:`AHEAD_ELEMENTS` a block per iteration, or of
    one iteration, loads as it goes."""
    from mirage_xdsl.ir.builder import new_kernel_graph
    from mirage_xdsl.lowering import triton_loops
    from mirage_xdsl.lowering.triton_loops import AHEAD_ELEMENTS, loads_ahead

    assert loads_ahead(8, AHEAD_ELEMENTS)
    assert not loads_ahead(8, AHEAD_ELEMENTS + 1)
    assert not loads_ahead(1, 16)

    def fma_kernel(k: int, n: int) -> str:
        g = new_kernel_graph("proj")
        x = g.new_input((1, k))
        w = g.transpose(g.new_input((n, k)), 0, 1)
        g.mark_output(g.matmul(g.mul(x, x), w))
        source = generate_triton(g.module()).source
        return source[source.index("def proj_k1_fma(") : source.index("BUFFERS")]

    assert "iteration 0" in fma_kernel(4096, 1024)  # 2 x 1024 elements a step
    monkeypatch.setattr(triton_loops, "AHEAD_ELEMENTS", 1024)
    assert "iteration 0" not in fma_kernel(4096, 1024)
