"""The table and files ``tools/tensor_parallel.py`` writes: a Markdown row
per block, batch and source (a module, or one sharded with DTensor)."""

from __future__ import annotations

import json
from pathlib import Path


def fmt(us: float | None) -> str:
    return "—" if us is None else f"{us:.1f}"


def cell(row: dict, key: str) -> str:
    """A time, marked when it was taken eagerly (no CUDA graph)."""
    eager = row.get(f"{key}_mode") == "eager"
    return fmt(row.get(key)) + (" (eager)" if eager else "")


def ratio(num: float | None, den: float | None) -> str:
    return "—" if num is None or not den else f"{num / den:.2f}x"


def markdown(rows: list[dict], device: str) -> str:
    lines = [
        f"Tensor parallel over {rows[0]['shards']} GPUs ({device}), fp16, µs per step "
        "(CUDA graph, L2 flushed, median; two-GPU times are the slower GPU's)",
        "",
        "| block | from | batch | ours TP | torch TP | ours 1 GPU | torch 1 GPU "
        "| floor TP / 1 GPU | kernels TP / 1 GPU | TP speed-up over ours 1 GPU "
        "| ours TP vs torch TP | verified | correct |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['block']} | {r['from']} | {r['batch']} | {cell(r, 'ours_tp')} "
            f"| {cell(r, 'torch_tp')} | {cell(r, 'ours_one_gpu')} "
            f"| {cell(r, 'torch_one_gpu')} "
            f"| {fmt(r['floor_tp'])} / {fmt(r['floor_one_gpu'])} "
            f"| {r['kernels_shard']} / {r['kernels_one_gpu']} "
            f"| {ratio(r.get('ours_one_gpu'), r.get('ours_tp'))} "
            f"| {ratio(r.get('torch_tp'), r.get('ours_tp'))} "
            f"| {'yes' if r['verified'] else 'NO'} | {'yes' if r['correct'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def write(rows: list[dict], device: str, out_dir: str, seconds: float) -> None:
    """The table and the rows so far, so a run cut short keeps them."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tensor_parallel.md").write_text(markdown(rows, device))
    summary = {"rows": rows, "seconds": seconds, "device": device}
    (out / "tensor_parallel.json").write_text(json.dumps(summary, indent=2))
