"""Ordinary torch models through ``mirage_xdsl.torch.superoptimize`` on a GPU.

For each model, written the usual way (``nn.Linear`` and an activation
module, or the Llama-style ``mirage_xdsl.torch.models.DecoderLayer``): the
kernels of the captured program and of the search's µGraph, the relative L2
error of the µGraph's result against the model in fp32 on
``torch.randn`` inputs, and the time per call of the µGraph, of eager mode and
of ``torch.compile``, in one run, timed as ``tools/bench.py`` times (calls
captured in a CUDA graph, L2 flushed before each, the flushes' own time
subtracted, the median kept). For the layer, also the same layer with its
softmax written as ``exp(s) / sum(exp(s))``, run as captured: its largest
logit and whether its fp16 result stays finite::

    python tools/torch_models.py [--models relu_mlp,gelu_mlp] [--budget 300] [--out DIR]

Writes ``torch_models.json`` and ``torch_models.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from mirage_xdsl.torch import MirageFunction, capture, capture_program, superoptimize
from mirage_xdsl.torch.models import DecoderLayer, PlainSoftmaxLayer, trained

BATCH, D_MODEL, D_HIDDEN = 16, 1024, 4096
LAYER = {"dim": 2048, "heads": 16, "kv_heads": 4, "hidden": 5632}
"""The decoder layer's sizes: head dim 128, four query heads per key head."""
LAYER_TOKENS = 256


def mlp(activation: nn.Module) -> nn.Module:
    return nn.Sequential(
        nn.Linear(D_MODEL, D_HIDDEN), activation, nn.Linear(D_HIDDEN, D_MODEL)
    )


def decoder_layer() -> nn.Module:
    return trained(DecoderLayer(**LAYER), qk_gain=QK_GAIN)


QK_GAIN = 2.0
"""Query/key projection gain of the layer: logits as large as a trained
model's (see :func:`mirage_xdsl.torch.models.trained`)."""

MODELS: dict[str, Callable[[], nn.Module]] = {
    "linear": lambda: nn.Linear(D_MODEL, D_HIDDEN),
    "relu_mlp": lambda: mlp(nn.ReLU()),
    "gelu_mlp": lambda: mlp(nn.GELU()),
    "gelu_tanh_mlp": lambda: mlp(nn.GELU(approximate="tanh")),
    "silu_mlp": lambda: mlp(nn.SiLU()),
    "decoder_layer": decoder_layer,
}
INPUTS: dict[str, tuple[int, ...]] = {
    "decoder_layer": (1, LAYER_TOKENS, LAYER["dim"]),
}
"""Input shapes other than ``[BATCH, D_MODEL]``."""


def kernels(module) -> int:
    """Top-level kernel ops of the program's function: one launch each."""
    fn = next(iter(module.body.block.ops))
    return sum(1 for op in fn.body.block.ops if op.name.startswith("kernel."))


def rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def time_us(call: Callable[[], object]) -> float:
    from mirage_xdsl.runtime.timer import BATCH as CALLS
    from mirage_xdsl.runtime.timer import GraphTimer

    return GraphTimer().per_call_us([call], CALLS)


def run_model(name: str, budget: float) -> dict:
    torch.manual_seed(0)
    model = MODELS[name]().half().cuda().eval()
    shape = INPUTS.get(name, (BATCH, D_MODEL))
    x = torch.randn(*shape, device="cuda", dtype=torch.float16)
    row: dict = {"model": name, "input": list(x.shape)}
    with torch.no_grad():
        ref = model.float()(x.float())
        model.half()
        if isinstance(model, DecoderLayer):
            row["plain_softmax"] = plain_softmax(model, x)
        row["kernels_before"] = kernels(capture(model, [x]))
        start = time.monotonic()
        found = superoptimize(model, [x], budget=budget)
        row["search_s"] = round(time.monotonic() - start, 1)
        row["kernels_after"] = kernels(found.module)
        out = found(x)
        row["rel_l2_vs_fp32"] = rel_l2(out, ref)
        row["rel_l2_eager_fp16"] = rel_l2(model(x), ref)
        compiled = torch.compile(model)
        compiled(x)
        row["us"] = {
            "mirage": time_us(lambda: found(x)),
            "eager": time_us(lambda: model(x)),
            "torch.compile": time_us(lambda: compiled(x)),
        }
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


def markdown(rows: list[dict]) -> str:
    lines = [
        "| model | kernels before → after | rel. L2 vs fp32 (eager fp16) "
        "| mirage µs | eager µs | torch.compile µs | search s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['error']} | | | | | |")
            continue
        us = r["us"]
        lines.append(
            f"| {r['model']} | {r['kernels_before']} → {r['kernels_after']} "
            f"| {r['rel_l2_vs_fp32']:.2e} ({r['rel_l2_eager_fp16']:.2e}) "
            f"| {us['mirage']:.1f} | {us['eager']:.1f} | {us['torch.compile']:.1f} "
            f"| {r['search_s']} |"
        )
    for r in rows:
        if "plain_softmax" in r:
            p = r["plain_softmax"]
            lines.append(
                f"\n{r['model']} with its softmax written as exp(s) / sum(exp(s)), "
                f"run as captured: largest logit {p['max_logit']}, fp16 result "
                f"{'finite' if p['finite'] else 'not finite (exp overflows)'} "
                f"(eager: {'finite' if p['eager_finite'] else 'not finite'})."
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--budget", type=float, default=300.0, help="search seconds")
    parser.add_argument("--out", type=Path, default=Path("torch-models-out"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("torch_models: error: torch sees no CUDA device", file=sys.stderr)
        return 1
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        print(f"torch_models: error: unknown model(s) {unknown}", file=sys.stderr)
        return 1
    rows = []
    for name in names:
        try:
            rows.append(run_model(name, args.budget))
        except Exception as e:  # one model's failure is a row, not the end
            rows.append({"model": name, "error": f"{type(e).__name__}: {e}"})
        print(json.dumps(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "torch_models.json").write_text(json.dumps(rows, indent=1))
    table = markdown(rows)
    (args.out / "torch_models.md").write_text(table)
    print(table)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
