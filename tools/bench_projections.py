#!/usr/bin/env python3
"""Decode projections and small row-wise programs against the memory floor.

Each projection ``x [M, K] @ w.t()`` (fp16, M = 1, 8, 16; the K x N of
Llama-3.2-1B and Llama-3-8B-sized layers; ``w`` is ``[N, K]``, as
``nn.Linear`` keeps it and a captured layer reads it, or ``[K, N]`` with
``--weights kn``, multiplied as it is) is timed as:

- ``default``: the program as written, lowered by ``default-customize`` (the
  build every search segment falls back to) and compiled by the Triton
  backend, autotuned on this GPU;
- ``search``: the search's pick for the program (measured selection on this
  GPU, within ``--search-cap`` seconds);
- ``torch.matmul`` (cuBLAS, ``x @ w.t()`` or ``x @ w``), ``torch.compile`` and ``torch.compile``
  ``max-autotune`` (without inductor's CUDA graphs: every method is captured
  in our own).

The *normed* projections (``norm+KxN[+N]``) are the same matmuls reading
the rows of an RMSNorm times its weight, as a layer's q/k/v and gate/up
projections do: ``rms_norm(x) * g @ w`` (one or two weights), timed as
``default`` (where the split-K kernels compute the norm themselves), ``search``,
eager torch and both ``torch.compile`` modes.

The row-wise programs (add + RMSNorm with a weight, softmax, LayerNorm
written as plain ops, L2 norm, an element-wise chain ``silu(x) * y + z``) at
1, 8 and 16 rows of 2048 and 4096 are captured from torch functions and timed
as ``default`` and ``search`` against eager torch and ``torch.compile``.

Every method is timed the project's way (``runtime/timer.GraphTimer``: 20
calls in a CUDA graph, L2 flushed before each, the flushes' own time taken
off, the median of the repetitions), its result checked against torch in
fp32 first (a wrong result is reported, not timed). The floor of a program is
the fewest bytes it must move (inputs read once, outputs written once) at the
bandwidth of a 1 GiB copy kernel timed the same way
(``runtime/bandwidth.py``); each method's ``% of floor`` is floor / time.

The run keeps to ``--budget`` seconds: the phases run cheapest first
(torch.matmul, our default builds, torch.compile, the row-wise programs, the
search's picks, max-autotune last) and what the budget leaves out is marked
``skipped``. Triton's autotuning choices are cached under
``$MIRAGE_CACHE_DIR``, so a second run spends its time on timing::

    python tools/bench_projections.py --out DIR                 # 6 to 7 minutes
    python tools/bench_projections.py --only 8192x2048 --rows 1 --out DIR
    python tools/bench_projections.py --dry-run                 # no GPU: build all

Writes ``projections.json`` and ``projections.md`` to ``--out`` (default $OUT).
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import floor_bench  # noqa: E402
from floor_bench import floor_cell, floor_us, numel, one_line  # noqa: E402

PROJECTIONS = (
    (2048, 2048),
    (2048, 512),
    (2048, 3072),
    (2048, 8192),
    (2048, 16384),
    (8192, 2048),
    (4096, 4096),
    (4096, 1024),
    (4096, 14336),
    (14336, 4096),
)
"""K x N: the q/o, k/v, gate/up and down projections of Llama-3.2-1B and
Llama-3-8B-sized layers (and a 2048 x 8192 / 16384 up projection)."""
NORMED = (
    (2048, (3072,)),
    (2048, (8192, 8192)),
    (4096, (6144,)),
    (4096, (14336, 14336)),
)
"""K and the N of each projection reading one RMSNorm's rows (times its
weight): q/k/v as one matmul, and gate and up, of the 1B and 8B layers."""
ROWS = (1, 8, 16)
WIDTHS = (2048, 4096)
BATCH = 20
"""Calls per CUDA graph, as ``tools/bench.py``'s headline figure."""
TOLERANCE = 2e-2


def add_rmsnorm(x, r, w):
    import torch

    h = x + r
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) * w


def softmax(x):
    import torch

    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def layernorm(x):
    import torch

    c = x - x.mean(-1, keepdim=True)
    return c / torch.sqrt((c * c).mean(-1, keepdim=True) + 1e-5)


def l2norm(x):
    import torch

    return x / torch.sqrt((x * x).sum(-1, keepdim=True))


def chain(x, y, z):
    import torch.nn.functional as F

    return F.silu(x) * y + z


ROWWISE: dict[str, tuple[Callable, Callable[[int, int], list[tuple[int, ...]]]]] = {
    "add_rmsnorm": (add_rmsnorm, lambda m, n: [(m, n), (m, n), (n,)]),
    "softmax": (softmax, lambda m, n: [(m, n)]),
    "layernorm": (layernorm, lambda m, n: [(m, n)]),
    "l2norm": (l2norm, lambda m, n: [(m, n)]),
    "chain": (chain, lambda m, n: [(m, n)] * 3),
}
"""Each row-wise program and the input shapes it takes at ``m`` rows of ``n``."""


@dataclass
class Case:
    """One program at one size, and how each method did."""

    name: str
    kind: str
    """``projection``, ``normed`` or ``rowwise``."""
    rows: int
    shapes: list[list[int]]
    floor_bytes: int
    us: dict[str, float] = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)
    """Per method: ok, wrong (with the error), error (one line), skipped."""
    default_kernels: list[dict] = field(default_factory=list)
    """The default build's launches: grid, threads, for-loop (the split)."""
    linear: bool = False
    """Whether the weights are ``[N, K]``, as ``nn.Linear`` keeps them (the
    program reads them transposed, torch multiplies by ``w.t()``)."""


# --- programs -----------------------------------------------------------------


def _weight(g, k: int, n: int, linear: bool):
    """A ``[K, N]`` weight input, or the transpose of an ``[N, K]`` one."""
    return g.transpose(g.new_input((n, k)), 0, 1) if linear else g.new_input((k, n))


def projection_module(m: int, k: int, n: int, linear: bool = False):
    from mirage_xdsl.ir.builder import new_kernel_graph

    g = new_kernel_graph(f"proj_{m}x{k}x{n}")
    x = g.new_input((m, k))
    g.mark_output(g.matmul(x, _weight(g, k, n, linear)))
    return g.module()


EPS = 1e-5
"""The normed programs' RMSNorm epsilon."""


def normed_module(m: int, k: int, ns: tuple[int, ...], linear: bool = False):
    from mirage_xdsl.ir.builder import new_kernel_graph

    g = new_kernel_graph("norm_" + "_".join(f"{k}x{n}" for n in ns))
    x, gain = g.new_input((m, k)), g.new_input((k,))
    rows = g.mul(g.rms_norm(x, EPS), gain)
    for n in ns:
        g.mark_output(g.matmul(rows, _weight(g, k, n, linear)))
    return g.module()


def normed_torch(x, gain, *weights, linear: bool = False):
    """What :func:`normed_module` computes, as a model's RMSNorm does it (in
    fp32, then back to the rows' type, times the weight): every product."""
    import torch

    rows = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + EPS)
    rows = rows.to(x.dtype) * gain
    return tuple(rows @ (w.t() if linear else w) for w in weights)


def linear_product(x, w):
    """``x @ w.t()``: ``F.linear`` without a bias (cuBLAS)."""
    return x @ w.t()


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _wanted(args, name: str, group: str) -> bool:
    return not args.only or name in args.only or group in args.only


def cases(args) -> list[Case]:
    out = []
    linear = args.weights == "linear"

    def weight(k: int, n: int) -> list[int]:
        return [n, k] if linear else [k, n]

    for k, n in PROJECTIONS:
        if not _wanted(args, f"{k}x{n}", "projections"):
            continue
        for m in args.rows:
            bytes_ = 2 * (m * k + k * n + m * n)
            shapes = [[m, k], weight(k, n)]
            out.append(Case(f"{k}x{n}", "projection", m, shapes, bytes_, linear=linear))
    for k, ns in NORMED:
        name = f"norm+{k}x" + "+".join(map(str, ns))
        if not _wanted(args, name, "normed"):
            continue
        for m in args.rows:
            ins = [[m, k], [k], *(weight(k, n) for n in ns)]
            bytes_ = 2 * (sum(numel(s) for s in ins) + m * sum(ns))
            out.append(Case(name, "normed", m, ins, bytes_, linear=linear))
    for name, (_, shapes) in ROWWISE.items():
        if not _wanted(args, name, "rowwise"):
            continue
        for width in WIDTHS:
            for m in args.rows:
                ins = [list(s) for s in shapes(m, width)]
                bytes_ = 2 * (sum(numel(s) for s in ins) + m * width)
                out.append(Case(f"{name}/{width}", "rowwise", m, ins, bytes_))
    return out


def module_of(case: Case):
    """The kernel-level program of ``case`` (row-wise ones captured from torch)."""
    side = 0 if case.linear else 1  # where a weight's N is
    if case.kind == "projection":
        (m, k), w = case.shapes
        return projection_module(m, k, w[side], case.linear)
    if case.kind == "normed":
        (m, k), _, *weights = case.shapes
        return normed_module(m, k, tuple(w[side] for w in weights), case.linear)
    import torch

    from mirage_xdsl.torch import capture

    fn = ROWWISE[case.name.split("/")[0]][0]
    examples = [torch.zeros(s, dtype=torch.float16) for s in case.shapes]
    return capture(fn, examples)


def torch_fn(case: Case) -> Callable:
    import torch

    if case.kind == "projection":
        return linear_product if case.linear else torch.matmul
    if case.kind == "normed":
        return functools.partial(normed_torch, linear=case.linear)
    return ROWWISE[case.name.split("/")[0]][0]


# --- timing -------------------------------------------------------------------


class Bench:
    """Builds, checks and times each method of each case on one device."""

    def __init__(self, args, timer=None, device: str = "cuda"):
        import torch

        from mirage_xdsl.runtime.timer import GraphTimer

        self.args = args
        self.torch = torch
        self.device = device
        self.timer = timer or GraphTimer(reps=args.reps, warmup=3)
        self.deadline = time.monotonic() + args.budget

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def inputs(self, case: Case) -> list:
        torch = self.torch
        g = torch.Generator(device=self.device).manual_seed(0)
        xs = []
        k = case.shapes[0][-1]
        for s in case.shapes:
            x = torch.randn(s, device=self.device, dtype=torch.float16, generator=g)
            if (case.kind, len(xs)) == ("projection", 1) or (
                case.kind == "normed" and len(xs) > 1 and len(s) == 2
            ):
                x /= k**0.5  # a weight: products of unit size
            xs.append(x)
        return xs

    def reference(self, case: Case, xs: list):
        return _first(torch_fn(case)(*[x.float() for x in xs]))

    def check(self, got, want) -> str:
        err = float((got.float() - want).norm() / want.norm().clamp_min(1e-30))
        return "" if err <= TOLERANCE else f"wrong (rel L2 {err:.2e})"

    def time_method(
        self, case: Case, method: str, make: Callable[[], Callable]
    ) -> None:
        """Build ``method``'s call (``make`` returns ``call(xs) -> output``),
        check it and time it; errors and wrong results are recorded."""
        if self.left() <= 0:
            case.status[method] = "skipped (budget)"
            return
        xs = self.inputs(case)
        try:
            call = make()
            problem = self.check(call(xs), self.reference(case, xs))
            if not problem:
                case.us[method] = self.timer.per_call_us([lambda: call(xs)], BATCH)
            case.status[method] = problem or "ok"
        except Exception as e:  # one method failing is a row of the report
            case.status[method] = "error: " + one_line(e)
            if self.device == "cuda":
                self.torch.cuda.synchronize()
        print(
            json.dumps(
                {
                    "case": case.name,
                    "rows": case.rows,
                    "method": method,
                    "us": case.us.get(method),
                    "status": case.status[method],
                }
            ),
            flush=True,
        )

    def ours(
        self, case: Case, module_fn: Callable, record: bool = False
    ) -> Callable[[], Callable]:
        """Our program from ``module_fn``, compiled by the Triton backend
        (autotuned); ``record``: keep its launches in the case."""

        def make():
            from mirage_xdsl.runtime.api import compile

            compiled = compile(module_fn(), backend="triton")
            if record:
                case.default_kernels = launches_of(compiled)
            outs: list = []

            def call(xs):
                if not outs:
                    outs.extend(compiled.run(*xs))
                else:
                    compiled.run(*xs, outputs=outs)
                return outs[0]

            return call

        return make

    def module_of(self, case: Case):
        """The case's program, as the search starts from it."""
        return module_of(case)

    def searched(self, case: Case):
        """The search's pick for the case's program, measured on this GPU."""
        from xdsl.dialects.builtin import ModuleOp

        from mirage_xdsl.passes.superoptimize import resolve_measure
        from mirage_xdsl.search.options import SearchOptions
        from mirage_xdsl.search.superoptimizer import superoptimize_function
        from mirage_xdsl.semantics.interpreter import entry_function

        outcome = superoptimize_function(
            entry_function(self.module_of(case)),
            SearchOptions(budget=self.args.search_cap),
            measure=resolve_measure("auto"),
            cache_dir=self.args.search_cache,
        )
        return ModuleOp([outcome.function])

    def torch_method(self, case: Case, mode: str | None) -> Callable[[], Callable]:
        def make():
            torch = self.torch
            fn = torch_fn(case)
            if mode is not None:
                options = {"dynamic": False}
                if mode == "max-autotune":
                    options["mode"] = "max-autotune-no-cudagraphs"
                fn = torch.compile(fn, **options)
            return lambda xs: _first(fn(*xs))

        return make

    def copy_bandwidth(self) -> float:
        """Bytes per second of a 1 GiB copy kernel (read + write)."""
        from mirage_xdsl.runtime.bandwidth import copy_bandwidth

        return copy_bandwidth(self.timer, self.device)


def launches_of(compiled) -> list[dict]:
    return [
        {"kernel": launch.name, "grid": list(launch.grid), "threads": launch.block[0]}
        for launch in compiled.program.launches
    ]


METHODS = ("default", "search", "torch", "torch.compile", "max-autotune")


PHASES = (
    ("projection", "torch"),
    ("projection", "default"),
    ("projection", "torch.compile"),
    ("rowwise", "torch"),
    ("rowwise", "default"),
    ("rowwise", "torch.compile"),
    ("normed", "torch"),
    ("normed", "default"),
    ("normed", "torch.compile"),
    ("projection", "search"),
    ("rowwise", "search"),
    ("normed", "search"),
    ("projection", "max-autotune"),
    ("normed", "max-autotune"),
)
"""(programs, method) in the order they run: cheapest first, so a run its
budget cuts short still has the headline figures."""


def run(args) -> tuple[list[Case], float]:
    bench = Bench(args)
    copy = bench.copy_bandwidth()
    print(f"copy bandwidth {copy / 1e12:.2f} TB/s", flush=True)
    todo = cases(args)
    makers: dict[str, Callable[[Case], Callable[[], Callable]]] = {
        "torch": lambda c: bench.torch_method(c, None),
        "default": lambda c: bench.ours(c, lambda: module_of(c), record=True),
        "torch.compile": lambda c: bench.torch_method(c, "default"),
        "search": lambda c: bench.ours(c, lambda: bench.searched(c)),
        "max-autotune": lambda c: bench.torch_method(c, "max-autotune"),
    }
    skipped = {
        "search": args.no_search,
        "torch.compile": args.no_compile,
        "max-autotune": args.no_compile or args.no_max_autotune,
    }
    for kind, method in PHASES:
        for case in (c for c in todo if c.kind == kind):
            if skipped.get(method):
                case.status[method] = "skipped (option)"
            else:
                bench.time_method(case, method, makers[method](case))
    return todo, copy


# --- report -------------------------------------------------------------------


def markdown(todo: list[Case], copy: float) -> str:
    columns = ["program", "rows", "floor µs", *METHODS, "default kernels"]
    rows = [
        [
            c.name,
            str(c.rows),
            floor_us(c, copy),
            *(floor_cell(c, m, copy) for m in METHODS),
            "; ".join(
                f"{k['grid'][0]}x{k['grid'][1]}x{k['grid'][2]}·{k['threads']}t"
                for k in c.default_kernels
            ),
        ]
        for c in todo
    ]
    return floor_bench.report(copy, columns, rows)


def dry_run(args) -> int:
    """Build every program and its default Triton kernels without a GPU."""
    from mirage_xdsl.lowering.triton import generate_triton

    for case in cases(args):
        program = generate_triton(module_of(case))
        grids = [list(k.grid) for k in program.kernels]
        print(f"{case.name} rows {case.rows}: {len(grids)} kernels {grids}")
    return 0


def parse_args(argv):
    p = floor_bench.parser(
        __doc__.splitlines()[0],
        budget=360.0,
        search_cap=8.0,
        only="projections (KxN), normed projections (norm+KxN), row-wise programs "
        "by name, or the groups 'projections', 'normed' and 'rowwise'",
    )
    p.add_argument(
        "--rows", type=lambda s: [int(v) for v in s.split(",")], default=list(ROWS)
    )
    p.add_argument("--no-max-autotune", action="store_true")
    p.add_argument(
        "--weights",
        choices=("linear", "kn"),
        default="linear",
        help="linear: [N, K], as nn.Linear keeps them (torch multiplies by w.t(), "
        "the program reads them transposed); kn: [K, N]",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return floor_bench.main(parse_args(argv), "projections", run, dry_run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
