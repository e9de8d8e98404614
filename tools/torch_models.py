"""Ordinary torch models through ``mirage_xdsl.torch.superoptimize`` on a GPU.

The decode step of a Llama-style layer (``mirage_xdsl.torch.models.
DecodeLayer``: RMSNorm, q/k/v projections with grouped key/value heads,
``F.scaled_dot_product_attention`` over the cached keys, residual adds, a
SiLU-gated MLP), written as model code is, at Llama-3.2-1B shapes (hidden
2048, 32 heads of 64, 8 KV heads, FFN 8192) with 512 and 4096 cached keys and
at Llama-3-8B shapes (hidden 4096, 32 heads of 128, 8 KV heads, FFN 14336)
with 1024, each at batch 1 and 8. Also, by name, small ``nn.Linear`` models
and the 256-token ``decoder_layer``.

For each: the kernels before and after the search, the relative L2 error of
the µGraph's result against the model in fp32, and the time per call of the
µGraph, of eager mode, of ``torch.compile`` and of ``torch.compile(mode=
"max-autotune-no-cudagraphs")``, in one run and timed alike (calls captured
in a CUDA graph, L2 flushed before each, the flushes' own time subtracted,
the median kept). Each layer's floor is its bytes (weights, cache, input and
outputs, each moved once) over the copy bandwidth measured in the same run
(a 1 GiB copy kernel, read plus written: ``runtime/bandwidth.py``); each time is given as a
percentage of it. A table per case gives each segment's search (its share
of the budget, seconds, kernels, input and chosen time)::

    python tools/torch_models.py [--quick] [--models NAMES] [--total 500]
        [--budget 240] [--out DIR] [--profile]

``--quick`` runs the 1B, 512-key, batch-1 step only. Searches share
``--total`` seconds: each case's budget is what is left over the cases
left, less what the previous case spent outside its search (compiling and
timing), capped at ``--budget``. On the H100 with 16 cores the full run
takes about 9 minutes (500 s of searches, compilations and timing, plus
start-up and the bandwidth measurement) and ``--quick`` about 6 (a 240 s
search, two torch compilations, timing). Writes ``torch_models.json`` and
``torch_models.md``, and ``torch_models_programs.json``: every program the
searches timed, with its time and cost, which ``python
tools/calibrate_cost_model.py torch_models_programs.json`` fits the cost
model to. ``--profile`` adds each method's kernels per call (plain calls
under ``torch.profiler``, L2 flushed before each), beside the graph-timed
figure; a kernel launched early under programmatic launch counts the time
it waits for the one before, so mirage's kernels can sum to more than its
call takes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from mirage_xdsl.torch import MirageFunction, capture, capture_program, superoptimize
from mirage_xdsl.torch.models import (
    DecodeLayer,
    DecoderLayer,
    PlainSoftmaxLayer,
    trained,
)

BATCH, D_MODEL, D_HIDDEN = 16, 1024, 4096
LAYER = {"dim": 2048, "heads": 16, "kv_heads": 4, "hidden": 5632}
"""The 256-token decoder layer's sizes: head dim 128, four query heads per key head."""
LAYER_TOKENS = 256
QK_GAIN = 2.0
"""Query/key projection gain of the layers: logits as large as a trained
model's (see :func:`mirage_xdsl.torch.models.trained`)."""

LLAMA_1B = {"dim": 2048, "heads": 32, "kv_heads": 8, "hidden": 8192}
LLAMA_8B = {"dim": 4096, "heads": 32, "kv_heads": 8, "hidden": 14336}


@dataclass(frozen=True)
class Decode:
    """A decode step: the layer's sizes, cached keys, batch."""

    sizes: dict
    keys: int
    batch: int

    def build(self, device: str = "cuda") -> tuple[nn.Module, list[torch.Tensor]]:
        layer = trained(DecodeLayer(**self.sizes), qk_gain=QK_GAIN)
        layer = layer.half().to(device).eval()
        x = torch.randn(self.batch, 1, self.sizes["dim"], device=device).half()
        return layer, [x, *layer.cache(self.batch, self.keys)]


DECODE: dict[str, Decode] = {
    f"{name}_k{keys}_b{batch}": Decode(sizes, keys, batch)
    for batch in (1, 8)
    for name, sizes, keys in (
        ("llama1b", LLAMA_1B, 512),
        ("llama1b", LLAMA_1B, 4096),
        ("llama8b", LLAMA_8B, 1024),
    )
}
QUICK = "llama1b_k512_b1"


def mlp(activation: nn.Module) -> nn.Module:
    return nn.Sequential(
        nn.Linear(D_MODEL, D_HIDDEN), activation, nn.Linear(D_HIDDEN, D_MODEL)
    )


def _plain(make: Callable[[], nn.Module], shape=(BATCH, D_MODEL)):
    def build() -> tuple[nn.Module, list[torch.Tensor]]:
        model = make().half().cuda().eval()
        return model, [torch.randn(*shape, device="cuda", dtype=torch.float16)]

    return build


OTHERS: dict[str, Callable[[], tuple[nn.Module, list[torch.Tensor]]]] = {
    "linear": _plain(lambda: nn.Linear(D_MODEL, D_HIDDEN)),
    "relu_mlp": _plain(lambda: mlp(nn.ReLU())),
    "gelu_mlp": _plain(lambda: mlp(nn.GELU())),
    "gelu_tanh_mlp": _plain(lambda: mlp(nn.GELU(approximate="tanh"))),
    "silu_mlp": _plain(lambda: mlp(nn.SiLU())),
    "decoder_layer": _plain(
        lambda: trained(DecoderLayer(**LAYER), qk_gain=QK_GAIN),
        (1, LAYER_TOKENS, LAYER["dim"]),
    ),
}
MODELS = [*DECODE, *OTHERS]


def builder(name: str) -> Callable[[], tuple[nn.Module, list[torch.Tensor]]]:
    return DECODE[name].build if name in DECODE else OTHERS[name]


def kernels(module) -> int:
    """Top-level kernel ops of the program's function: one launch each, but
    for buffer aliases (reshapes, contiguous slices: ``lowering/aliases.py``)."""
    from mirage_xdsl.lowering.aliases import is_alias

    fn = next(iter(module.body.block.ops))
    return sum(
        1
        for op in fn.body.block.ops
        if op.name.startswith("kernel.") and not is_alias(op)
    )


def first(out) -> torch.Tensor:
    return out[0] if isinstance(out, tuple | list) else out


def rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def time_us(call: Callable[[], object]) -> float:
    from mirage_xdsl.runtime.timer import BATCH as CALLS
    from mirage_xdsl.runtime.timer import GraphTimer

    return GraphTimer().per_call_us([call], CALLS)


def copy_tbps() -> float:
    """TB/s of a 1 GiB copy kernel, counting bytes read and written."""
    from mirage_xdsl.runtime.bandwidth import copy_bandwidth

    return copy_bandwidth() / 1e12


def layer_bytes(model: nn.Module, inputs: list[torch.Tensor], outputs) -> int:
    """Bytes a call must move at least: parameters, inputs and outputs once."""
    tensors = [*model.parameters(), *inputs]
    tensors += list(outputs) if isinstance(outputs, tuple | list) else [outputs]
    return sum(t.numel() * t.element_size() for t in tensors)


def segments(found: MirageFunction) -> list[dict]:
    """Each search of the program (one per segment or stage), from its report."""
    rows = []
    for r in found.reports:
        given = [m for m in r.measured if m.get("input")]
        chosen = [m for m in r.measured if m.get("chosen")]
        rows.append(
            {
                "segment": r.function,
                "budget_s": round(r.budget, 1),
                "search_s": round(r.seconds, 1),
                "stopped": r.stopped,
                "cached": r.cached,
                "kernels": f"{r.kernels_before} → {r.kernels_after}",
                "input_us": given[0].get("time_us") if given else None,
                "chosen_us": chosen[0].get("time_us") if chosen else None,
                "cost_us": [round(r.input_cost * 1e6, 1), round(r.best_cost * 1e6, 1)],
                "phases_s": {k: round(v, 2) for k, v in r.phases.items()},
                "timed": [
                    {
                        "kernels": m.get("kernels"),
                        "cost_us": round(m.get("cost_us", 0.0), 1),
                        "time_us": m.get("time_us"),
                        "wall_s": m.get("wall_s"),
                        **({"past_deadline": True} if m.get("past_deadline") else {}),
                    }
                    for m in r.measured
                ],
            }
        )
    return rows


def timed_programs(found: MirageFunction, name: str, batch: int) -> list[dict]:
    """Every program a segment's search timed, with its time and cost, as
    rows ``tools/calibrate_cost_model.py`` reads (the segment as workload)."""
    return [
        {
            "workload": f"{name}/{r.function}",
            "batch": batch,
            "time_us": m.get("time_us"),
            "cost_us": m.get("cost_us"),
            "program": m["program"],
        }
        for r in found.reports
        for m in r.measured
        if m.get("program") and m.get("time_us") is not None
    ]


def baselines(
    model: nn.Module, inputs: list[torch.Tensor]
) -> dict[str, Callable[[], object]]:
    """Eager and both torch.compile modes, each compiled (and run once)."""
    out: dict[str, Callable[[], object]] = {"eager": lambda: model(*inputs)}
    for name, options in (
        ("torch.compile", {}),
        ("max-autotune", {"mode": "max-autotune-no-cudagraphs"}),
    ):
        torch._dynamo.reset()
        compiled = torch.compile(model, **options)
        compiled(*inputs)
        out[name] = lambda c=compiled: c(*inputs)
    return out


def profiles(calls: dict[str, Callable[[], object]]) -> dict[str, dict]:
    """Each method's kernels (``runtime/kernel_profile.py``): per kernel name
    launches and µs per call, and for mirage one call's kernels in order."""
    from mirage_xdsl.runtime.kernel_profile import kernel_profile

    out = {}
    for name, call in calls.items():
        p = kernel_profile(call)
        out[name] = {
            "launches": p.launches,
            "kernel_us": round(p.us, 1),
            "kernels": [[k.name[:120], k.launches, round(k.us, 2)] for k in p.kernels],
        }
        if name == "mirage":
            out[name]["sequence"] = [[n[:120], round(us, 2)] for n, us in p.sequence]
    return out


def run_model(name: str, budget: float, tbps: float, profile: bool = False) -> dict:
    torch.manual_seed(0)
    model, inputs = builder(name)()
    row: dict = {"model": name, "inputs": [list(x.shape) for x in inputs]}
    with torch.no_grad():
        ref = first(model.float()(*[x.float() for x in inputs]))
        model.half()
        if isinstance(model, DecoderLayer) and not isinstance(model, DecodeLayer):
            row["plain_softmax"] = plain_softmax(model, inputs[0])
        row["kernels_before"] = kernels(capture(model, inputs))
        start = time.monotonic()
        found = superoptimize(model, inputs, budget=budget)
        row["budget_s"] = round(budget, 1)
        row["search_s"] = round(time.monotonic() - start, 1)
        row["kernels_after"] = kernels(found.module)
        out = found(*inputs)
        row["rel_l2_vs_fp32"] = rel_l2(first(out), ref)
        row["rel_l2_eager_fp16"] = rel_l2(first(model(*inputs)), ref)
        row["segments"] = segments(found)
        row["timed_programs"] = timed_programs(found, name, inputs[0].shape[0])
        calls = {"mirage": lambda: found(*inputs), **baselines(model, inputs)}
        row["us"] = {method: time_us(call) for method, call in calls.items()}
        row["floor_us"] = layer_bytes(model, inputs, out) / (tbps * 1e12) * 1e6
        if profile:
            row["profile"] = profiles(calls)
    return row


def plain_softmax(model: DecoderLayer, x: torch.Tensor) -> dict:
    """The same layer with attention written as ``exp(s) / sum(exp(s))``,
    captured and run as written (no search): how far its logits go, and
    whether its result is still finite in fp16."""
    plain = PlainSoftmaxLayer(**LAYER).half().cuda().eval()
    plain.load_state_dict(model.state_dict())
    h = model.attention_norm(x)
    q = model.wq(h).float().view(*x.shape[:2], model.heads, model.head_dim)
    k = model.wk(h).float().view(*x.shape[:2], model.kv_heads, model.head_dim)
    group = model.heads // model.kv_heads
    q, k = q.transpose(1, 2), k.transpose(1, 2).repeat_interleave(group, dim=1)
    logits = q @ k.transpose(2, 3) * model.head_dim**-0.5
    out = MirageFunction(capture_program(plain, [x]))(x)
    return {
        "max_logit": round(float(logits.max()), 1),
        "finite": bool(torch.isfinite(out).all()),
        "eager_finite": bool(torch.isfinite(plain(x)).all()),
    }


METHODS = ("mirage", "eager", "torch.compile", "max-autotune")


def markdown(rows: list[dict], tbps: float) -> str:
    lines = [
        f"Copy bandwidth {tbps:.2f} TB/s (a 1 GiB copy kernel, read + written); "
        "µs per call, % of the floor in parentheses.\n",
        "| model | kernels before → after | rel. L2 vs fp32 (eager fp16) | floor µs | "
        + " | ".join(f"{m} µs" for m in METHODS)
        + " | search s (budget) |",
        "| --- " * (5 + len(METHODS)) + "|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['error']} |" + " |" * (3 + len(METHODS)))
            continue
        floor = r["floor_us"]
        times = " | ".join(
            f"{r['us'][m]:.1f} ({100 * floor / r['us'][m]:.0f}%)" for m in METHODS
        )
        lines.append(
            f"| {r['model']} | {r['kernels_before']} → {r['kernels_after']} "
            f"| {r['rel_l2_vs_fp32']:.2e} ({r['rel_l2_eager_fp16']:.2e}) "
            f"| {floor:.1f} | {times} | {r['search_s']} ({r['budget_s']}) |"
        )
    for r in rows:
        lines += segment_table(r)
        lines += profile_lines(r)
        if "plain_softmax" in r:
            p = r["plain_softmax"]
            lines.append(
                f"\n{r['model']} with its softmax written as exp(s) / sum(exp(s)), "
                f"run as captured: largest logit {p['max_logit']}, fp16 result "
                f"{'finite' if p['finite'] else 'not finite (exp overflows)'} "
                f"(eager: {'finite' if p['eager_finite'] else 'not finite'})."
            )
    return "\n".join(lines) + "\n"


def segment_table(row: dict) -> list[str]:
    """The searches of one model: a row per segment (or stage)."""
    if not row.get("segments"):
        return []

    def us(v: float | None) -> str:
        return "" if v is None else f"{v:.1f}"

    lines = [
        f"\n{row['model']}, by segment:\n",
        "| segment | budget s | search s | kernels | input µs | chosen µs "
        "| cost µs (input → chosen) | stopped |",
        "| --- " * 8 + "|",
    ]
    for s in row["segments"]:
        stopped = s["stopped"] + (" (cached)" if s["cached"] else "")
        lines.append(
            f"| {s['segment']} | {s['budget_s']} | {s['search_s']} | {s['kernels']} "
            f"| {us(s['input_us'])} | {us(s['chosen_us'])} "
            f"| {s['cost_us'][0]} → {s['cost_us'][1]} | {stopped} |"
        )
    return lines


def profile_lines(row: dict, top: int = 12) -> list[str]:
    """Each method's launches, kernel time and longest kernels; mirage's
    kernels of one call in launch order."""
    if "profile" not in row:
        return []
    lines = [f"\n{row['model']}, kernels per call (plain calls, L2 flushed):\n"]
    for method, p in row["profile"].items():
        lines.append(
            f"- {method}: {p['launches']} launches, {p['kernel_us']} µs of kernel "
            f"time (graph-timed: {row['us'][method]:.1f} µs)"
        )
        lines += [f"  - {us:.1f} µs {n}x `{k[:80]}`" for k, n, us in p["kernels"][:top]]
    lines.append(f"\n{row['model']}, mirage's kernels in launch order:\n")
    lines += [
        f"{i}. {us:.1f} µs `{k[:80]}`"
        for i, (k, us) in enumerate(row["profile"]["mirage"]["sequence"], 1)
    ]
    return lines


OVERHEAD_S = 60.0
"""What a case is assumed to spend outside its search (capture, two torch
compilations, timing) before one has been measured."""
MIN_BUDGET_S = 15.0


def budget_for(left_s: float, cases_left: int, overhead_s: float, cap: float) -> float:
    """A case's search budget: its part of the time left, less its overhead."""
    share = left_s / max(cases_left, 1) - overhead_s
    return max(MIN_BUDGET_S, min(cap, share))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DECODE))
    parser.add_argument("--quick", action="store_true", help=f"only {QUICK}")
    parser.add_argument("--total", type=float, default=500.0, help="seconds in all")
    parser.add_argument("--budget", type=float, default=240.0, help="search cap")
    parser.add_argument("--out", type=Path, default=Path("torch-models-out"))
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also each method's kernels per call (torch.profiler), and mirage's "
        "in launch order",
    )
    args = parser.parse_args(argv)
    names = [QUICK] if args.quick else [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        print(f"torch_models: error: unknown model(s) {unknown}", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("torch_models: error: torch sees no CUDA device", file=sys.stderr)
        return 1
    end = time.monotonic() + args.total
    tbps = copy_tbps()
    rows, overhead = [], OVERHEAD_S
    for i, name in enumerate(names):
        left = end - time.monotonic()
        budget = budget_for(left, len(names) - i, overhead, args.budget)
        start = time.monotonic()
        try:
            rows.append(run_model(name, budget, tbps, args.profile))
            overhead = time.monotonic() - start - rows[-1]["search_s"]
        except Exception as e:  # one model's failure is a row, not the end
            rows.append({"model": name, "error": f"{type(e).__name__}: {e}"})
        shown = {k: v for k, v in rows[-1].items() if k != "timed_programs"}
        print(json.dumps(shown), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    programs = [p for r in rows for p in r.pop("timed_programs", [])]
    (args.out / "torch_models_programs.json").write_text(
        json.dumps({"rows": programs}, indent=1)
    )
    result = {"copy_tbps": tbps, "rows": rows}
    (args.out / "torch_models.json").write_text(json.dumps(result, indent=1))
    table = markdown(rows, tbps)
    (args.out / "torch_models.md").write_text(table)
    print(table)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
