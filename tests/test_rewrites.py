"""Rewrites: retargeting µGraphs, emitting PDL patterns, loading and applying them."""

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.ir.rebuild import RetargetError, retarget
from mirage_xdsl.layers import build_transformer_layer
from mirage_xdsl.rewrites.emit import EmitError, emit_pattern, library_module
from mirage_xdsl.rewrites.library import (
    finite_field_check,
    library_paths,
    load_library,
)
from mirage_xdsl.semantics.interpreter import entry_function, run
from mirage_xdsl.workloads import (
    HANDWRITTEN,
    WORKLOADS,
    build_gqa_flashdecoding,
    random_inputs,
)


def context():
    from xdsl.dialects import pdl

    ctx = make_context()
    ctx.load_dialect(pdl.PDL)
    return ctx


def small_gqa_library(tmp_path: Path, template=None) -> Path:
    src = entry_function(WORKLOADS["gqa"].module(1, 8))
    opt = template or entry_function(build_gqa_flashdecoding(1, 8, splits=4, forloop=2))
    path = tmp_path / "gqa.mlir"
    path.write_text(module_text(library_module([(src, opt, "gqa")])))
    return path


@pytest.mark.parametrize("name", ["gqa_flashdecoding", "rmsnorm_linear_fused"])
def test_retarget_to_batch_8_matches_plain(name: str) -> None:
    workload, build = HANDWRITTEN[name]
    template = entry_function(build(1, 8))
    plain8 = WORKLOADS[workload].module(8, 8)
    types = entry_function(plain8).function_type.inputs.data
    module = ModuleOp([retarget(template, types)])
    module.verify()
    xs = random_inputs(plain8, 1, -0.5, 0.5)
    for out, ref in zip(run(module, xs), run(plain8, xs), strict=True):
        assert np.allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_retarget_refuses_a_partition_that_does_not_divide() -> None:
    _, build = HANDWRITTEN["rmsnorm_linear_fused"]
    template = entry_function(build(1, 8))
    odd = entry_function(WORKLOADS["rmsnorm_linear"].module(1, 8)).function_type
    from xdsl.dialects.builtin import TensorType, f16

    types = [TensorType(f16, [2, 500]), TensorType(f16, [500, 500])]
    assert odd.inputs.data != tuple(types)
    with pytest.raises(RetargetError):
        retarget(template, types)


def test_pattern_pins_ops_and_attributes() -> None:
    pattern = emit_pattern(entry_function(WORKLOADS["gqa"].module(1, 8)), "gqa")
    text = str(pattern)
    assert text.count('pdl.operation "kernel.matmul"') == 2
    assert '"dim" = %' in text and 'with "mirage.instantiate"' in text


def test_multi_output_functions_are_not_patterns() -> None:
    with pytest.raises(EmitError):
        emit_pattern(entry_function(WORKLOADS["norm_transformer"].module(1, 8)), "nt")


def test_library_round_trips_and_loads(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path / "cache"))
    path = small_gqa_library(tmp_path)
    (rewrite,) = load_library(context(), [path], finite_field_check)
    assert rewrite.name == "gqa"
    # a second load is answered from the cache of verified instantiations
    assert list((tmp_path / "cache" / "rewrites").iterdir())


def test_library_rejects_a_wrong_template(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MIRAGE_CACHE_DIR", "off")
    wrong = entry_function(WORKLOADS["gqa"].module(1, 8)).clone()
    exp = next(op for op in wrong.walk() if op.name == "kernel.exp")
    exp.results[0].replace_all_uses_with(exp.operands[0])
    exp.detach()
    exp.erase()
    path = small_gqa_library(tmp_path, wrong)
    with pytest.raises(MirageError, match="not equivalent"):
        load_library(context(), [path], finite_field_check)


def test_bundled_library_names_templates() -> None:
    paths = library_paths("")
    assert {p.stem for p in paths} >= {"gqa", "rmsnorm_linear", "head_mlp"}
    always = lambda a, b: (True, "trusted")  # noqa: E731 - structure only
    rewrites = load_library(context(), paths, always)
    assert len(rewrites) == len(paths)


def test_layer_is_rewritten_by_the_library(monkeypatch, tmp_path: Path) -> None:
    from xdsl.pattern_rewriter import PatternRewriteWalker

    from mirage_xdsl.passes.apply_mirage_rewrites import LibraryPattern

    monkeypatch.setenv("MIRAGE_CACHE_DIR", "off")
    ctx = context()
    layer = build_transformer_layer(1, 8)
    before = layer.clone()
    trusted = lambda a, b: (True, "trusted")  # noqa: E731 - checked below
    pattern = LibraryPattern(
        ctx, load_library(ctx, library_paths(""), trusted), trusted
    )
    PatternRewriteWalker(pattern, apply_recursively=True).rewrite_module(layer)
    layer.verify()
    kernels = [
        op for op in entry_function(layer).body.block.ops if op.name != "func.return"
    ]
    assert len(kernels) == 7
    xs = random_inputs(before, 0, -0.25, 0.25)
    for out, ref in zip(run(layer, xs), run(before, xs), strict=True):
        assert np.allclose(out, ref, rtol=1e-3, atol=1e-4)
