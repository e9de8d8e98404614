#!/usr/bin/env python3
"""The ops real models need, timed on the GPU against PyTorch.

Each program is one a Hugging Face Llama layer runs, written with the ops
that capture it (fp16 unless said):

- ``norm_linear``: RMSNorm of ``x [2, 16, 2048]`` times a weight ``[2048]``,
  times a shared 2-d projection ``[2048, 2048]`` (rank broadcasting, and a
  batched input times one weight, never copied per batch);
- ``rope``: ``x * cos + rotate_half(x) * sin`` on ``[1, 32, 16, 64]`` with
  ``cos``, ``sin`` of ``[16, 64]`` (``kernel.slice``, ``kernel.concat``);
- ``masked_attention``: 16 queries of 32 heads over 1024 keys (head dim 64)
  with a causal 0/1 mask ``[16, 1024]`` multiplied after ``exp``;
- ``repeat_kv``: 8 key heads of ``[1024, 64]`` stretched to 32
  (``kernel.broadcast``, then a reshape);
- ``norm_bf16``: a bf16 ``[16, 4096]`` cast to fp32, normalised, cast back
  (``kernel.cast``).

Methods: ``default`` (the program as written, lowered by default-customize,
compiled by the Triton backend, autotuned), ``search`` (the search's pick,
measured on this GPU within ``--search-cap`` seconds), ``torch`` (eager; for
attention, scaled_dot_product_attention with the boolean mask) and
``torch.compile``. Every method's result is checked against the fp32 torch
reference first (a wrong result is reported, not timed), then timed the
project's way (``runtime/timer.GraphTimer``: 20 calls in a CUDA graph, L2
flushed before each, the flushes' own time taken off). The floor is the
fewest bytes each program must move at the bandwidth of a 1 GiB copy::

    python tools/bench_model_ops.py --out DIR          # at most 7 minutes (--budget 420)
    python tools/bench_model_ops.py --only rope,repeat_kv --no-search
    python tools/bench_model_ops.py --dry-run          # no GPU: build all

Writes ``model_ops.json`` and ``model_ops.md`` to ``--out`` (default $OUT).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import floor_bench  # noqa: E402
from bench_projections import Bench  # noqa: E402
from floor_bench import floor_cell, floor_us, numel, one_line  # noqa: E402

BATCH = 20
TOLERANCE = 2e-2
METHODS = ("default", "search", "torch", "torch.compile")


@dataclass
class Program:
    """A model op's program: our builder, torch's function and its inputs."""

    name: str
    shapes: list[tuple[int, ...]]
    build: Callable
    """``build(g, *inputs) -> output`` with the kernel-level builder."""
    torch_fn: Callable
    dtype: str = "f16"
    mask_input: int = -1
    """The input that is a causal 0/1 mask (made, not drawn)."""


def _rms(torch, x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def _rotate_half(torch, x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _masked_attention_torch(q, k, v, m):
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(
        q, k.transpose(-1, -2), v, attn_mask=m.bool(), scale=1.0
    )


def _masked_attention(g, q, k, v, m):
    s = g.matmul(q, k)
    e = g.mul(g.exp(g.add(s, g.neg(g.reduce_max(s, 3)))), m)
    return g.matmul(g.div(e, g.reduction(e, 3)), v)


def _torch(name):
    import torch

    return {
        "norm_linear": lambda x, w, p: (_rms(torch, x) * w) @ p,
        "rope": lambda x, c, s: x * c + _rotate_half(torch, x) * s,
        "masked_attention": _masked_attention_torch,
        "repeat_kv": lambda k: k.expand(1, 8, 4, 1024, 64).reshape(1, 32, 1024, 64),
        "norm_bf16": lambda x: _rms(torch, x.float()).to(torch.bfloat16),
    }[name]


def _rope(g, x, c, s):
    lo, hi = g.split(x, [32, 32], 3)
    return g.add(g.mul(x, c), g.mul(g.concat(g.neg(hi), lo, 3), s))


def _norm_bf16(g, x):
    from mirage_xdsl.ir.builder import bfloat16, float32

    return g.cast(g.rms_norm(g.cast(x, float32), 1e-6), bfloat16)


PROGRAMS = [
    Program(
        "norm_linear",
        [(2, 16, 2048), (2048,), (2048, 2048)],
        lambda g, x, w, p: g.matmul(g.mul(g.rms_norm(x, 1e-6), w), p),
        lambda: _torch("norm_linear"),
    ),
    Program(
        "rope",
        [(1, 32, 16, 64), (16, 64), (16, 64)],
        _rope,
        lambda: _torch("rope"),
    ),
    Program(
        "masked_attention",
        [(1, 32, 16, 64), (1, 32, 64, 1024), (1, 32, 1024, 64), (16, 1024)],
        _masked_attention,
        lambda: _torch("masked_attention"),
        mask_input=3,
    ),
    Program(
        "repeat_kv",
        [(1, 8, 1, 1024, 64)],
        lambda g, k: g.reshape(g.broadcast(k, (1, 8, 4, 1024, 64)), (1, 32, 1024, 64)),
        lambda: _torch("repeat_kv"),
    ),
    Program("norm_bf16", [(16, 4096)], _norm_bf16, lambda: _torch("norm_bf16"), "bf16"),
]


def module_of(program: Program):
    from mirage_xdsl.ir.builder import bfloat16, float16, new_kernel_graph

    g = new_kernel_graph(program.name)
    dtype = bfloat16 if program.dtype == "bf16" else float16
    xs = [g.new_input(s, dtype) for s in program.shapes]
    g.mark_output(program.build(g, *xs))
    return g.module()


@dataclass
class Case:
    name: str
    shapes: list[list[int]]
    floor_bytes: int
    us: dict[str, float] = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)


class ModelOpsBench(Bench):
    """``tools/bench_projections.Bench``'s timing and checks, on these programs."""

    def __init__(self, args, programs: dict[str, Program]):
        super().__init__(args)
        self.programs = programs

    def inputs(self, case: Case) -> list:
        torch = self.torch
        program = self.programs[case.name]
        dtype = torch.bfloat16 if program.dtype == "bf16" else torch.float16
        gen = torch.Generator(device="cuda").manual_seed(0)
        xs = []
        for i, s in enumerate(case.shapes):
            if i == program.mask_input:
                rows, cols = s
                ones = torch.ones(rows, cols, device="cuda")
                xs.append(torch.tril(ones, cols - rows).to(dtype))
                continue
            x = torch.randn(s, device="cuda", dtype=dtype, generator=gen)
            xs.append(x / max(1.0, s[-2] ** 0.5) if len(s) > 1 and i else x)
        return xs

    def reference(self, case: Case, xs: list):
        return self.programs[case.name].torch_fn()(*[x.float() for x in xs]).float()

    def module_of(self, case: Case):
        return module_of(self.programs[case.name])

    def torch_call(self, case: Case, compiled: bool) -> Callable[[], Callable]:
        def make():
            fn = self.programs[case.name].torch_fn()
            if compiled:
                fn = self.torch.compile(fn, dynamic=False)
            return lambda xs: fn(*xs)

        return make


def cases(args, programs: dict[str, Program]) -> list[Case]:
    out = []
    for name, p in programs.items():
        if args.only and name not in args.only:
            continue
        out_shape = module_of(p).body.block.ops.first.function_type.outputs.data[0]
        bytes_ = 2 * (sum(numel(s) for s in p.shapes) + numel(out_shape.get_shape()))
        out.append(Case(name, [list(s) for s in p.shapes], bytes_))
    return out


def run(args) -> tuple[list[Case], float]:
    programs = {p.name: p for p in PROGRAMS}
    bench = ModelOpsBench(args, programs)
    copy = bench.copy_bandwidth()
    print(f"copy bandwidth {copy / 1e12:.2f} TB/s", flush=True)
    todo = cases(args, programs)
    for case in todo:
        prog = programs[case.name]
        makers = {
            "default": bench.ours(case, lambda p=prog: module_of(p)),
            "torch": bench.torch_call(case, False),
            "torch.compile": bench.torch_call(case, True),
            "search": bench.ours(case, lambda c=case: bench.searched(c)),
        }
        for method in METHODS:
            if method == "search" and args.no_search:
                case.status[method] = "skipped (option)"
            elif method == "torch.compile" and args.no_compile:
                case.status[method] = "skipped (option)"
            else:
                bench.time_method(case, method, makers[method])
    return todo, copy


def markdown(todo: list[Case], copy: float) -> str:
    rows = [
        [c.name, floor_us(c, copy), *(floor_cell(c, m, copy) for m in METHODS)]
        for c in todo
    ]
    return floor_bench.report(copy, ["program", "floor µs", *METHODS], rows)


def dry_run(args) -> int:
    """Build every program's default Triton kernels and compile them for
    sm_90, without a GPU."""
    from mirage_xdsl.runtime.triton_backend import compile_triton, lower_triton

    for p in PROGRAMS:
        if args.only and p.name not in args.only:
            continue
        try:
            program = lower_triton(module_of(p))
            compile_triton(program, tune=False)
            grids = [list(k.grid) for k in program.kernels]
            print(f"{p.name}: {len(grids)} kernels {grids}")
        except Exception as e:  # a report line per program
            print(f"{p.name}: error: {one_line(e)}")
    return 0


def parse_args(argv):
    p = floor_bench.parser(
        __doc__.splitlines()[0],
        budget=420.0,
        search_cap=20.0,
        only="programs by name: " + ", ".join(prog.name for prog in PROGRAMS),
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return floor_bench.main(parse_args(argv), "model_ops", run, dry_run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
