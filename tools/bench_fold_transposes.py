"""Decode attention reading its key cache transposed in place, against the
same µGraph with the cache's transpose as a kernel of its own.

Captures ``F.scaled_dot_product_attention(q, k, v, enable_gqa=True)`` for one
query token as ``tools/bench_decode_attention.py`` does (its shapes and
options), searches it once per batch, and compiles the µGraph the search
picked twice for Triton: as the lowering now builds it (``fold-transposes``:
the attention kernel reads ``k`` through swapped strides) and with the
transpose given its default copy kernel first (``default-customize`` before
the Triton lowering: what the lowering built before the fold), which reads
and writes the whole key cache on every call. On a GPU both are checked
against fp32 torch and timed alike in one run (calls in a CUDA graph, L2
flushed before each, the flushes' own time subtracted); without one (or with
``--dry-run``) only the search and the lowering run::

    python tools/bench_fold_transposes.py [--keys 4096] [--batch 1 8]
        [--budget 120] [--dry-run] [--out DIR]

On the H100 with 16 cores: one search per batch (``--budget`` seconds each,
timing its candidates), then seconds of autotuning and timing; about 5
minutes for the defaults. Writes ``fold_transposes.json`` to ``--out``
(default ``$OUT``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import bench_decode_attention as bda
import torch

from mirage_xdsl.dialects import kernel
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.lowering.default_customize import DefaultCustomizePass
from mirage_xdsl.lowering.triton import generate_triton


def with_transpose_kernels(module):
    """A copy of ``module`` whose transposes are copy kernels already, so the
    Triton lowering has none left to fold."""
    module = module.clone()
    DefaultCustomizePass().apply(make_context(), module)
    return module


def transposes(module) -> int:
    return sum(isinstance(op, kernel.TransposeOp) for op in module.walk())


def measure(args: argparse.Namespace, batch: int, gpu: bool) -> dict:
    """Search the decode attention at ``batch`` and time both lowerings."""
    from mirage_xdsl.runtime.api import compile as compile_program
    from mirage_xdsl.torch import superoptimize

    shape = argparse.Namespace(**{**vars(args), "batch": batch})
    xs = bda.inputs(shape, "cuda" if gpu else "cpu")
    options = {} if gpu else {"measure": None}
    found = superoptimize(bda.decode, xs, budget=args.budget, **options)
    variants = {
        "read in place": found.module,
        "transpose kernel": with_transpose_kernels(found.module),
    }
    row: dict = {
        "batch": batch,
        "keys": args.keys,
        "key_cache_mb": xs[1].numel() * xs[1].element_size() / 1e6,
        "transposes_in_ugraph": transposes(found.module),
        "kernels": {n: len(generate_triton(m).kernels) for n, m in variants.items()},
    }
    if not gpu:
        return row
    with torch.no_grad():
        ref = bda.decode(*[x.float() for x in xs])
        row["rel_l2_vs_fp32"], row["us"] = {}, {}
        for name, module in variants.items():
            compiled = compile_program(module, backend="triton")
            (got,) = _outputs(compiled(*xs))
            row["rel_l2_vs_fp32"][name] = float((got.float() - ref).norm() / ref.norm())
            row["us"][name] = bda.time_us(lambda c=compiled: c(*xs))
        moved = sum(x.numel() * x.element_size() for x in [*xs, ref.half()])
        row["floor_us"] = moved / (bda.copy_tbps() * 1e12) * 1e6
    return row


def _outputs(result) -> list[torch.Tensor]:
    return [result] if isinstance(result, torch.Tensor) else list(result)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--keys", type=int, default=4096)
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    p.add_argument("--budget", type=float, default=120.0, help="search seconds")
    p.add_argument("--dry-run", action="store_true", help="search only, no GPU")
    p.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT", "fold-transposes-out"))
    )
    args = p.parse_args(argv)
    gpu = torch.cuda.is_available() and not args.dry_run
    rows = [measure(args, b, gpu) for b in args.batch]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fold_transposes.json").write_text(json.dumps(rows, indent=1))
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
