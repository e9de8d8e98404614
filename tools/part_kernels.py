"""Print the Triton kernels a torch part's program launches, with bytes moved.

``torch.compile(model, backend="mirage")`` runs each decoder layer as one
part; this script reproduces those parts without a GPU. It builds a two-layer
Llama of the given shapes, traces one decode step (a static KV cache, one
token) through TorchDynamo, exports and partitions the graph as the backend
does (``mirage_xdsl.torch.partition``), searches each part that computes on
the cost model alone (no measure, no disk cache) and lowers it for Triton as
``mirage_xdsl.compile`` would. For each launch it prints the grid, the
for-loop, the ops of its block graph and the bytes its tensors hold (each
operand read once, each result written once):

    python tools/part_kernels.py                      # Llama-3.2-1B shapes
    python tools/part_kernels.py --small --budget 5   # the tiny test config
    python tools/part_kernels.py --no-search          # the captured program

On a GPU it runs the same (the search then times candidates only with
``--measure``) and is what to compare before and after a lowering change.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from math import prod

import torch
from transformers import LlamaConfig, LlamaForCausalLM, StaticCache
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import SSAValue

from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.lowering.triton import (
    TritonProgram,
    customized_module,
    generate_triton,
    legalized,
)
from mirage_xdsl.search import make_options, superoptimize_module
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.torch.partition import partition
from mirage_xdsl.torch.trace import export

SHAPES = {
    "1b": dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_attention_heads=32,
        num_key_value_heads=8,
    ),
    "small": dict(
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
    ),
}


def config(small: bool) -> LlamaConfig:
    """Two decoder layers of Llama-3.2-1B's shapes (or the tiny test ones): the
    part between them is the one every layer of a deeper model repeats."""
    return LlamaConfig(
        **SHAPES["small" if small else "1b"],
        num_hidden_layers=2,
        vocab_size=256,
        rms_norm_eps=1e-5,
        max_position_embeddings=8192,
        attn_implementation="sdpa",
    )


def decode_parts(small: bool, dtype: torch.dtype, cache_len: int) -> list:
    """The parts the backend makes of one decode step's graph."""
    parts = []

    def grab(gm, example_inputs):
        program = export(gm, example_inputs).module()
        parts.extend(p for p in partition(program).parts)
        return gm.forward

    torch.manual_seed(0)
    model = LlamaForCausalLM(config(small)).to(dtype).eval()
    cache = StaticCache(config=model.config, max_cache_len=cache_len)
    compiled = torch.compile(model, backend=grab, dynamic=False)
    with torch.no_grad():
        compiled(
            input_ids=torch.tensor([[1]]),
            past_key_values=cache,
            cache_position=torch.tensor([0]),
            use_cache=True,
        )
    return parts


def nbytes(value: SSAValue) -> int:
    ty = value.type
    assert isinstance(ty, TensorType)
    return prod(ty.get_shape()) * ty.element_type.bitwidth // 8  # type: ignore[attr-defined]


def read_bytes(op, index: int) -> int:
    """Bytes a kernel reads of operand ``index``: the whole tensor, or only
    the windows its ``block.input`` ops read (``fold-slices``)."""
    whole = nbytes(op.operands[index])
    reads = [u.operation for u in op.entry.args[index].uses]
    windows = [r for r in reads if getattr(r, "window_of", None) is not None]
    if not reads or len(windows) < len(reads):
        return whole
    elem = whole // prod(t.tensor_shape(op.operands[index]))
    return min(whole, sum(prod(r.viewed_shape) * elem for r in windows))


SKIPPED = ("block.input", "block.output", "block.thread_graph")


def block_ops(op) -> str:
    """The block graph's ops of a customized kernel, by kind, in order."""
    names = Counter()
    order = []
    for inner in op.entry.ops:
        if inner.name in SKIPPED or inner.name.startswith("thread."):
            continue
        name = inner.name.removeprefix("block.")
        if name not in names:
            order.append(name)
        names[name] += 1
    threads = [o for o in op.entry.ops if o.name == "block.thread_graph"]
    fused = sum(
        1 for g in threads for o in g.regions[0].walk() if o.name.startswith("thread.")
    )
    text = " ".join(f"{n}x{names[n]}" if names[n] > 1 else n for n in order)
    return (text or "copy") + (f" +{fused} fused" if fused else "")


def kernel_rows(module: ModuleOp) -> list[tuple]:
    """Per launch: name, grid, for-loop, block ops, bytes read, bytes written."""
    program: TritonProgram = generate_triton(module)
    fn = entry_function(legalized(customized_module(module), "dot"))
    ops = [op for op in fn.body.block.ops if op.name == "kernel.customized"]
    rows = []
    for k, op in zip(program.kernels, ops, strict=True):
        read = sum(read_bytes(op, i) for i in range(len(op.operands)))
        written = sum(nbytes(v) for v in op.results)
        rows.append((k.name, k.grid, k.forloop, block_ops(op), read, written))
    return rows


def print_rows(title: str, rows: list[tuple]) -> None:
    print(f"\n{title}: {len(rows)} kernel(s)")
    print(f"{'kernel':<28} {'grid':<14} {'loop':>4} {'read':>10} {'written':>9}  ops")
    for name, grid, loop, ops, read, written in rows:
        g = "x".join(map(str, grid))
        print(f"{name:<28} {g:<14} {loop:>4} {read:>10} {written:>9}  {ops}")
    total = sum(r[4] + r[5] for r in rows)
    print(f"total bytes moved: {total}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="the tiny test shapes")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--cache-len", type=int, default=1024)
    parser.add_argument("--budget", type=float, default=30.0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--no-search", action="store_true")
    parser.add_argument("--measure", action="store_true", help="time on the GPU")
    parser.add_argument("--mlir", action="store_true", help="print the programs")
    args = parser.parse_args(argv)
    parts = decode_parts(args.small, getattr(torch, args.dtype), args.cache_len)
    for part in [p for p in parts if p.computes()]:
        module = part.captured.module
        name = entry_function(module).sym_name.data
        if not args.no_search:
            module = module.clone()
            measure = None
            if args.measure:
                from mirage_xdsl.passes.superoptimize import resolve_measure

                measure = resolve_measure("auto")
            options = make_options(budget=args.budget, jobs=args.jobs)
            superoptimize_module(module, options, measure, None, sys.stderr)
        if args.mlir:
            print(module)
        print_rows(f"{part.name} @{name}", kernel_rows(module))
    return 0


if __name__ == "__main__":
    sys.exit(main())
