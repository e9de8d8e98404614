"""Causal prefill attention, captured from torch, becomes one FlashAttention
kernel: a grid over query-row tiles (and key heads), a for-loop over key
tiles reading the mask tile beside the keys and values, and the online
softmax (a part maximum per tile, numerator and denominator accumulated
shifted by it).

Captured ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` is ten
kernel ops (the causal mask a 0/1 input multiplied after ``exp``), one chain
the partition cannot cut; its fused block graph needs eleven ops (the row
sum folds into an accumulation, the numerator is accumulated beside it), so
the search gives such a program room for one op more than it has
(``generator.block_op_bound``). Its candidates are screened on non-negative
inputs (``screening.SCREEN_RANGE``): on inputs from [-1, 1] the random mask
makes some rows' denominators cancel, and at 512 keys every fused candidate
failed the screen by fp32 rounding alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.search.generator import block_op_bound
from mirage_xdsl.search.ugraph import from_function
from mirage_xdsl.semantics.interpreter import entry_function

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))


def _captured(heads: int, kv_heads: int, head: int, tokens: int):
    from bench_prefill_attention import prefill

    from mirage_xdsl.torch.capture import capture_program

    g = torch.Generator().manual_seed(0)
    xs = [
        torch.randn(1, h, tokens, head, generator=g).half()
        for h in (heads, kv_heads, kv_heads)
    ]
    return capture_program(prefill, xs), xs


def _attention_function(heads: int, kv_heads: int, head: int, tokens: int):
    """The captured program's arithmetic: the segment the search takes."""
    from mirage_xdsl.search.partition import Segment, partition

    (captured, _) = _captured(heads, kv_heads, head, tokens)
    (segment,) = [
        p
        for p in partition(entry_function(captured.module), 9)
        if isinstance(p, Segment)
    ]
    return segment.function


def _flash_attention(found: ModuleOp, tokens: int) -> kernel.CustomizedOp:
    """The one customized kernel of ``found`` (layout ops aside), checked to
    loop over key tiles: keys, values and the mask read a tile of the keys per
    iteration, the queries once; the online softmax's part maximum and two
    accumulations shifted by it."""
    fn = entry_function(found)
    kernels = [
        op
        for op in fn.body.block.ops
        if op.name.startswith("kernel.")
        and op.name not in ("kernel.reshape", "kernel.transpose")
    ]
    assert len(kernels) == 1 and isinstance(kernels[0], kernel.CustomizedOp), found
    (flash,) = kernels
    assert flash.forloop > 1, f"no loop over the keys:\n{found}"
    reads = [op for op in flash.walk() if isinstance(op, block.InputOp)]
    looped = [
        r for r in reads if r.forloop_dim >= 0 and _shape(r)[r.forloop_dim] == tokens
    ]
    assert len(looped) == 3, f"keys, values and mask not read per key tile:\n{found}"
    assert any(isinstance(op, block.ReduceMaxOp) for op in flash.walk())
    accums = [op for op in flash.walk() if isinstance(op, block.ForloopAccumOp)]
    assert len(accums) == 2 and all(a.shift is not None for a in accums)
    return flash


def _shape(op: block.InputOp) -> tuple[int, ...]:
    return tuple(op.source.type.get_shape())  # type: ignore[attr-defined]


def test_a_chain_longer_than_max_ops_gets_room_for_one_kernel() -> None:
    attention = from_function(_attention_function(2, 1, 16, 64))
    assert len(attention.ops) == 10
    assert block_op_bound(attention, 9) == 11
    assert block_op_bound(attention, 12) == 12
    # a row-local chain has its fused build without a block search
    g = new_kernel_graph("chain")
    x = g.new_input((4, 64))
    for _ in range(10):
        x = g.exp(x)
    chain = from_function(entry_function(g.module()))
    assert block_op_bound(chain, 9) == 9


def _search(tokens: int, heads: int, kv_heads: int, head: int, budget: float):
    from bench_prefill_attention import fused, prefill, shape_of

    from mirage_xdsl.torch import superoptimize

    _, xs = _captured(heads, kv_heads, head, tokens)
    found = superoptimize(
        prefill,
        xs,
        budget=budget,
        measure=None,
        jobs=1,
        cache_dir="none",
        max_kernels=1,
        log=None,
    )
    assert fused(shape_of(found.module))
    return found, xs


@pytest.fixture(scope="module")
def small_pick():
    """64 tokens, two query heads over one key head of 16: the search
    completes in 6 to 11 s on a two-core machine, ranked by the cost model."""
    return _search(64, 2, 1, 16, budget=120.0)


def test_captured_causal_prefill_becomes_one_flash_attention_kernel(
    small_pick,
) -> None:
    """The pick loops over key tiles with the online softmax, is verified,
    and agrees with torch (the interpreter runs it on CPU tensors)."""
    from bench_prefill_attention import prefill

    found, xs = small_pick
    _flash_attention(found.module, 64)
    (report,) = found.reports
    assert report.kernels_after == 1 and report.verified >= 1
    got = found(*xs).float().numpy()
    want = prefill(*[x.float() for x in xs]).numpy()
    np.testing.assert_allclose(got, want, atol=2e-2, rtol=2e-2)


@pytest.mark.slow
def test_flash_attention_pick_compiles_and_runs_in_tritons_interpreter(
    small_pick, tmp_path
) -> None:
    """Both backends take the pick: its CUDA C compiles (where NVRTC is
    installed), and its Triton kernel, run by Triton's CPU interpreter,
    agrees with ours."""
    from test_triton import _interpret

    from mirage_xdsl.lowering import nvrtc
    from mirage_xdsl.lowering.cuda import generate_program

    found, _ = small_pick
    if nvrtc.available():
        assert nvrtc.compile_cuda(generate_program(found.module).source).cubin
    pytest.importorskip("triton")
    path = tmp_path / "found.mlir"
    path.write_text(str(found.module))
    for line in _interpret("file", str(path)):
        assert "error" not in line, line
        assert max(line["errors"]) < 1e-2, line


@pytest.mark.slow
def test_causal_prefill_at_llama_shape() -> None:
    """Llama-3.2-1B's 32 query heads over 8 key heads of 64, 512 tokens: one
    kernel looping over key tiles (about 80 s on a two-core machine, most
    of it screening and verifying at full shape)."""
    found, _ = _search(512, 32, 8, 64, budget=120.0)
    _flash_attention(found.module, 512)


def test_bench_tool_plain_form_and_table() -> None:
    """tools/bench_prefill_attention.py's plain-ops attention is the captured
    one (GQA and causal mask included), and its table has a row per method
    and a line per token count saying whether the pick is fused."""
    import argparse

    from bench_prefill_attention import eager_math, markdown, prefill

    _, xs = _captured(4, 2, 16, 32)
    xs = [x.float() for x in xs]
    torch.testing.assert_close(eager_math(*xs), prefill(*xs), atol=1e-5, rtol=1e-5)
    args = argparse.Namespace(heads=4, kv_heads=2, head_dim=16, batch=1)
    found = {
        "kernels": 1,
        "customized": [{"grid": [8, 1, 1], "forloop": 4}],
    }
    rows = [
        {
            "tokens": t,
            "search_s": 1.0,
            "found": found,
            "fused": True,
            "us": {"mirage": 10.0 * t, "sdpa cudnn": "error: RuntimeError: no"},
        }
        for t in (32, 64)
    ]
    table = markdown(args, rows)
    assert "| mirage | 320.0 | 640.0 |" in table
    assert "| sdpa cudnn | error: RuntimeError: no |" in table
    assert "- T = 64: 1 kernel(s), grid 8x1x1, for-loop 4; fused" in table


def test_slow_verdicts_on_a_gpu_stay_in_the_main_process(monkeypatch) -> None:
    """Forked verifier workers cannot use the GPU: a slow verdict on it (full
    shapes) keeps the rest there instead of moving them to the CPU."""
    from test_search import search

    from mirage_xdsl.search import screening

    monkeypatch.setattr(screening, "PARALLEL_VERDICT_SECONDS", 0.0)
    monkeypatch.setattr(screening, "gpu_arithmetic", lambda: object())
    pools: list[int] = []
    monkeypatch.setattr(screening, "verifier_pool", lambda n: pools.append(n))
    report = search("gated_mlp", jobs=2)[1].report
    assert pools == [] and report.verified >= 2


def test_bench_tool_times_the_pick_first_and_skips_past_its_limit(
    monkeypatch,
) -> None:
    import math
    import time

    import bench_prefill_attention as bench

    _, xs = _captured(2, 1, 16, 16)
    xs = [x.float() for x in xs]
    monkeypatch.setattr(bench, "torch_methods", lambda: {"eager math": None})
    monkeypatch.setattr(bench, "timed", lambda fn, xs, want: float(len(xs)))
    cases = [bench.Case(xs, "pick", {"tokens": t, "us": {}}) for t in (16, 32)]
    bench.time_all(cases, math.inf)
    assert [list(c.row["us"].items()) for c in cases] == [
        [("mirage", 3.0), ("eager math", 3.0)]
    ] * 2
    bench.time_all(cases, time.monotonic())
    assert {u for c in cases for u in c.row["us"].values()} == {"skipped (--limit)"}
