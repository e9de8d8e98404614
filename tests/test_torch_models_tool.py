"""tools/torch_models.py without a GPU: the decode layer, budgets, reports."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import torch_models  # noqa: E402

from mirage_xdsl.torch import superoptimize  # noqa: E402
from mirage_xdsl.torch.models import DecodeLayer, trained  # noqa: E402


def test_the_cases_are_the_decode_steps_at_both_shapes_and_batches():
    assert sorted(torch_models.DECODE) == sorted(
        f"{m}_k{k}_b{b}"
        for b in (1, 8)
        for m, k in (("llama1b", 512), ("llama1b", 4096), ("llama8b", 1024))
    )
    case = torch_models.DECODE["llama8b_k1024_b8"]
    assert case.sizes["dim"] == 4096 and case.sizes["hidden"] == 14336
    assert torch_models.QUICK in torch_models.DECODE


def test_budgets_share_the_total_and_keep_to_the_cap():
    assert torch_models.budget_for(540, 6, 60, 240) == 30
    assert torch_models.budget_for(540, 1, 60, 240) == 240
    assert torch_models.budget_for(10, 3, 60, 240) == torch_models.MIN_BUDGET_S


def test_a_decode_step_is_searched_and_reported_by_segment():
    layer = trained(DecodeLayer(dim=64, heads=4, kv_heads=2, hidden=128)).half()
    x = torch.randn(1, 1, 64).half()
    k, v = layer.cache(1, 32)
    with torch.no_grad():
        found = superoptimize(
            layer, [x, k, v], budget=6, jobs=1, cache_dir="none", measure=None
        )
        out, k_new, v_new = found(x, k, v)
        ref, k_ref, v_ref = layer.float()(x.float(), k.float(), v.float())
    assert torch_models.rel_l2(out, ref) < 5e-3
    assert torch_models.rel_l2(k_new, k_ref) < 5e-3
    rows = torch_models.segments(found)
    assert len(rows) == len(found.reports) > 2
    assert all(r["segment"].startswith("DecodeLayer_s") for r in rows)
    # each segment's share, and a stage's share of its segment, lie within the
    # whole budget (summing them counts time passed on or re-searched twice)
    assert all(0 < r["budget_s"] <= 6 for r in rows)
    moved = torch_models.layer_bytes(layer.half(), [x, k, v], (out, k_new, v_new))
    params = sum(p.numel() for p in layer.parameters())
    assert moved == 2 * (params + x.numel() * 2 + k.numel() * 2 + 2 * k_new.numel())
    row = {
        "model": "tiny",
        "kernels_before": 30,
        "kernels_after": 12,
        "rel_l2_vs_fp32": 1e-3,
        "rel_l2_eager_fp16": 1e-3,
        "floor_us": 10.0,
        "us": {m: 20.0 for m in torch_models.METHODS},
        "search_s": 6.1,
        "budget_s": 6.0,
        "segments": rows,
    }
    table = torch_models.markdown([row], 2.5)
    assert "| tiny | 30 → 12 |" in table and "20.0 (50%)" in table
    assert table.count("| DecodeLayer_s") == len(rows)


def test_timed_programs_are_rows_the_calibration_reads(tmp_path):
    """Each program a segment's search timed becomes a row of
    torch_models_programs.json that tools/calibrate_cost_model.py loads."""
    import json
    from types import SimpleNamespace

    import calibrate_cost_model

    from mirage_xdsl.ir.printing import module_text
    from mirage_xdsl.search.report import Report
    from mirage_xdsl.workloads import WORKLOADS

    report = Report("DecodeLayer_s0")
    text = module_text(WORKLOADS["rmsnorm_linear"].module(1, 16))
    report.measured = [
        {"input": True, "program": text, "time_us": 7.5, "cost_us": 12.0},
        {"program": text, "time_us": None},  # could not be timed: no row
    ]
    rows = torch_models.timed_programs(SimpleNamespace(reports=[report]), "m", 1)
    assert rows == [
        {
            "workload": "m/DecodeLayer_s0",
            "batch": 1,
            "time_us": 7.5,
            "cost_us": 12.0,
            "program": text,
        }
    ]
    path = tmp_path / "torch_models_programs.json"
    path.write_text(json.dumps({"rows": rows}))
    samples, groups = calibrate_cost_model.load_samples([str(path)])
    assert len(samples) == 1 and abs(samples[0].seconds - 7.5e-6) < 1e-12
    assert samples[0].group == "m/DecodeLayer_s0 b=1"


def test_profile_lines_give_totals_longest_kernels_and_mirages_order():
    row = {
        "model": "tiny",
        "us": {"mirage": 9.0, "eager": 12.0},
        "profile": {
            "mirage": {
                "launches": 2,
                "kernel_us": 8.0,
                "kernels": [["k_b", 1, 5.0], ["k_a", 1, 3.0]],
                "sequence": [["k_a", 3.0], ["k_b", 5.0]],
            },
            "eager": {"launches": 1, "kernel_us": 11.0, "kernels": [["gemv", 1, 11.0]]},
        },
    }
    text = "\n".join(torch_models.profile_lines(row))
    assert "- mirage: 2 launches, 8.0 µs of kernel time (graph-timed: 9.0 µs)" in text
    assert text.index("5.0 µs 1x `k_b`") < text.index("3.0 µs 1x `k_a`")
    assert "1. 3.0 µs `k_a`\n2. 5.0 µs `k_b`" in text
    assert torch_models.profile_lines({"model": "tiny"}) == []
