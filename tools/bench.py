#!/usr/bin/env python3
"""Benchmark: our µGraphs on the GPU against PyTorch, per workload and batch.

Ours: the search's result for the plain program (``superoptimize`` with
measured selection on this GPU, found in this run under --search-cap seconds),
under each code generator of --backends (Triton, autotuned on the GPU; CUDA C
through NVRTC), checked against the numpy reference first (a wrong kernel is
never timed). Beside it, in their own columns and never the headline: the
plain program compiled as written (no search), the hand-written µGraphs, and
a file from --mlir-dir. PyTorch: eager, torch.compile (default, and
max-autotune without inductor's own CUDA graphs, since we capture every method
in our own), and for attention scaled_dot_product_attention on each backend
(scale=1.0, K passed in its [b, heads, keys, d] layout).

How each method is timed (the same for all): a CUDA graph of one call per input
set (several sets, rotated), warm-up replays, then for each repetition a 256 MB
write to flush L2, and CUDA events around one replay; the median and the 10th
and 90th percentiles are reported. A second figure puts 20 calls in one graph
(launch latency amortised, as inside a model's layer), each after a flush; a
graph of the flushes alone is timed and subtracted; that second figure is the
headline. A timer idle for over a second first keeps the GPU busy for 0.1 s,
so clocks that dropped while something compiled are back up. A copy kernel
over 1 GiB, timed the same way, gives the bandwidth roofline
(``runtime/bandwidth.py``); each of our kernels' achieved bandwidth counts
the fewest bytes it must move (inputs read once, outputs written once).

torch.compile (especially max-autotune) can take minutes: compilations run
after the cheap methods, each under --compile-cap seconds, and only while the
whole run is inside --budget seconds; --no-compile / --no-max-autotune skip them.

  python tools/bench.py --batches 1           # one batch size per run fits 10 minutes
  python tools/bench.py --only gqa --batches 1 --no-max-autotune
  python tools/bench.py --dry-run             # no GPU: build and check what would run

The searches take most of a run. To time every form of every configuration in
one run when that does not fit, search first and keep the results (the
search cache holds each search's pick and measured runners-up, also of a
search that --search-cap stopped, for runs with the same cap or less; the
Triton choices go to $MIRAGE_CACHE_DIR), then run with the same cache:

  MIRAGE_CACHE_DIR=cache python tools/bench.py --search-only --search-cache cache/search
  MIRAGE_CACHE_DIR=cache python tools/bench.py --search-cache cache/search

Writes bench.json, bench.md, bench.png and search_candidates.json (every
candidate the searches timed, with its program) to --out (default $OUT).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mirage_xdsl.runtime.timer import BATCH, capture_graph

sys.path.insert(0, str(Path(__file__).resolve().parent))


@dataclass
class Method:
    """One way of computing one workload at one batch, and how it did."""

    name: str
    kind: str
    """"ours" (the search's result), "plain", "handwritten", "file" or "torch"."""
    status: str = "pending"
    """ok, wrong, error, skipped."""
    median_us: float | None = None
    p10_us: float | None = None
    p90_us: float | None = None
    error: float | None = None
    """Relative L2 error against the numpy reference."""
    note: str = ""
    build_s: float = 0.0
    graph: bool = True
    batched_us: float | None = None
    """Median µs per call with BATCH calls in one graph, L2 flushed before
    each call, the flushes' own time subtracted."""


@dataclass
class Config:
    workload: str
    batch: int
    min_bytes: int = 0
    methods: list[Method] = field(default_factory=list)
    search: dict = field(default_factory=dict)
    """The search's report (explored, seconds, what it timed), without programs."""

    def best(self, kind: str) -> Method | None:
        done = [m for m in self.methods if m.kind == kind and m.status == "ok"]
        return min(done, key=lambda m: m.median_us, default=None)

    def best_batched(self, kind: str) -> Method | None:
        done = [
            m
            for m in self.methods
            if m.kind == kind and m.status == "ok" and m.batched_us is not None
        ]
        return min(done, key=lambda m: m.batched_us, default=None)


# --- timing ------------------------------------------------------------------------


class Timer:
    """CUDA-graph replays between L2 flushes, timed with events."""

    def __init__(self, reps: int, warmup: int):
        import torch

        from mirage_xdsl.runtime.timer import GraphTimer

        self.torch = torch
        self.reps = reps
        self.warmup = warmup
        self.graphs = GraphTimer(reps=max(reps // 10, 10), warmup=2)
        """Times the BATCH-calls-per-graph figure; its flush buffer is ours too."""
        self.flush_buffer = self.graphs.flush_buffer

    def flush(self) -> None:
        self.flush_buffer.fill_(1)

    def time(self, calls: list[Callable[[], object]]) -> tuple[np.ndarray, bool]:
        """Microseconds per repetition, and whether CUDA graphs were used."""
        torch = self.torch
        try:
            runners = [capture_graph(fn, warmup=3).replay for fn in calls]
            graph = True
        except Exception:
            torch.cuda.synchronize()
            runners, graph = calls, False
        for i in range(self.warmup):
            self.flush()
            runners[i % len(runners)]()
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.reps)]
        for i in range(self.reps):
            self.flush()
            starts[i].record()
            runners[i % len(runners)]()
            ends[i].record()
        torch.cuda.synchronize()
        us = np.array(
            [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends, strict=True)]
        )
        return us, graph

    def batched(self, calls: list[Callable[[], object]]) -> float | None:
        """µs per call with BATCH calls (input sets in turn) in one CUDA graph,
        L2 flushed before each call and the flushes' own time subtracted
        (``GraphTimer.per_call_us``). None when the calls cannot be captured."""
        try:
            return self.graphs.per_call_us(calls, BATCH)
        except Exception:
            self.torch.cuda.synchronize()
            return None


def record_timing(method: Method, us: np.ndarray, graph: bool) -> None:
    method.median_us = float(np.median(us))
    method.p10_us = float(np.percentile(us, 10))
    method.p90_us = float(np.percentile(us, 90))
    method.graph = graph
    method.status = "ok"
    if not graph:
        method.note = (method.note + "; " if method.note else "") + "no CUDA graph"


class CompileTimeout(Exception):
    pass


@contextlib.contextmanager
def time_cap(seconds: float):
    """Raise CompileTimeout in this (main) thread after ``seconds``."""

    def expire(signum, frame):
        raise CompileTimeout(f"over {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --- candidates ------------------------------------------------------------------------


def mlir_file(directory: Path, workload: str, batch: int) -> Path | None:
    """``<w>_b<batch>.mlir``, or ``<w>.mlir`` for batch 1 (the examples' naming)."""
    names = [f"{workload}_b{batch}.mlir"] + ([f"{workload}.mlir"] if batch == 1 else [])
    return next((directory / n for n in names if (directory / n).is_file()), None)


def candidates(
    args, workload: str, batch: int, config: Config | None = None
) -> list[tuple[str, str, Callable]]:
    """(label, kind, thunk building the module) for each of our µGraphs."""
    from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS

    out: list[tuple[str, str, Callable]] = []
    if args.search:

        def search():
            return searched(WORKLOADS[workload].module(batch, args.scale), args, config)

        out.append(("search", "ours", search))
    out.append(
        ("plain", "plain", lambda: WORKLOADS[workload].module(batch, args.scale))
    )
    out += [
        (h, "handwritten", lambda b=build: b(batch, args.scale))
        for h, (w, build) in HANDWRITTEN.items()
        if w == workload
    ]
    if args.mlir_dir and (path := mlir_file(Path(args.mlir_dir), workload, batch)):

        def load(path=path):
            from mirage_xdsl.ir.context import make_context
            from mirage_xdsl.ir.diagnostics import parse, verify

            module = parse(make_context(), path.read_text(), str(path))
            verify(module)
            return module

        out.append((f"file:{path.name}", "file", load))
    return out


TIMED_CANDIDATES: list[dict] = []
"""Every candidate the searches timed, with its program: search_candidates.json,
what tools/calibrate_cost_model.py fits the cost model to."""


def searched(module, args, config: Config | None):
    """The search's µGraph for ``module`` (what ``mirage-opt --superoptimize``
    gives a user on this machine: measured selection when a GPU is visible),
    within ``--search-cap`` seconds; its report goes into ``config``."""
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.passes.superoptimize import resolve_measure
    from mirage_xdsl.search.options import SearchOptions
    from mirage_xdsl.search.superoptimizer import superoptimize_function
    from mirage_xdsl.semantics.interpreter import entry_function

    outcome = superoptimize_function(
        entry_function(module),
        SearchOptions(budget=args.search_cap),
        measure=resolve_measure(args.search_measure),
        cache_dir=args.search_cache,
    )
    report = outcome.report
    print(report.summary(), flush=True)
    if config is not None:
        from bench_measured import candidate_rows

        TIMED_CANDIDATES.extend(candidate_rows(config.workload, config.batch, report))
        config.search = {
            **report.to_json(),
            "measured": [
                {k: v for k, v in m.items() if k != "program"} for m in report.measured
            ],
        }
    return ModuleOp([outcome.function])


# --- one configuration --------------------------------------------------------------------


class Bench:
    def __init__(self, args):
        import torch

        from mirage_xdsl.runtime.check import FP16_TOLERANCE, INPUT_AMPLITUDE

        self.args = args
        self.torch = torch
        self.tol = FP16_TOLERANCE
        self.amplitude = INPUT_AMPLITUDE
        self.timer = Timer(args.reps, args.warmup)
        self.begin = time.monotonic()
        self.deadline = self.begin + args.budget

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def past_stop(self) -> bool:
        stop = self.args.stop_after
        return stop is not None and time.monotonic() - self.begin > stop

    def setup(self, config: Config):
        """Input sets on the GPU and the numpy reference for the first set."""
        from mirage_xdsl.workloads import WORKLOADS, input_shapes

        torch = self.torch
        workload = WORKLOADS[config.workload]
        module = workload.module(config.batch, self.args.scale)
        shapes = input_shapes(module)
        gen = torch.Generator(device="cuda").manual_seed(self.args.seed)
        sets = [
            [
                (
                    (torch.rand(s, device="cuda", generator=gen) * 2 - 1)
                    * self.amplitude
                ).half()
                for s in shapes
            ]
            for _ in range(self.args.rotate)
        ]
        refs = workload.reference(*[x.float().cpu().numpy() for x in sets[0]])
        config.min_bytes = sum(x.numel() * 2 for x in sets[0]) + sum(
            r.size * 2 for r in refs
        )
        return sets, refs

    def check(self, method: Method, outs, refs) -> bool:
        from mirage_xdsl.runtime.check import compare

        result = compare([o.float().cpu().numpy() for o in outs], refs, self.tol)
        method.error = result.worst
        if not result.ok:
            method.status = "wrong"
            method.note = result.summary()
        return result.ok

    def ours(self, config: Config, sets, refs) -> None:
        from mirage_xdsl.runtime import compile
        from mirage_xdsl.runtime.arguments import element_type

        torch = self.torch
        built: dict[str, object] = {}
        runs = [
            (label, kind, make, backend)
            for label, kind, make in candidates(
                self.args, config.workload, config.batch, config
            )
            for backend in (
                self.args.backends if kind == "ours" else self.args.reference_backends
            )
        ]
        for label, kind, make, backend in runs:
            method = Method(f"{label}/{backend}", kind)
            config.methods.append(method)
            try:
                t = time.perf_counter()
                if label not in built:  # the search runs once for both backends
                    try:
                        built[label] = make()
                    except Exception as e:
                        built[label] = e
                if isinstance(built[label], Exception):
                    raise built[label]
                compiled = compile(built[label], backend=backend)
                compiled.load()
                method.build_s = time.perf_counter() - t
                method.note = f"{len(compiled.program.launches)} launch(es)"
                if compiled.choices:
                    method.note += "; " + ", ".join(
                        c.key() for c in compiled.choices.values()
                    )
                outs_per_set = [
                    [
                        torch.full(
                            s.shape,
                            float("nan"),
                            dtype=element_type(s).torch_dtype(),
                            device="cuda",
                        )
                        for s in compiled.outputs()
                    ]
                    for _ in sets
                ]
                compiled.poison_intermediates()
                compiled.run(*sets[0], outputs=outs_per_set[0])
                compiled.synchronize()
                if not self.check(method, outs_per_set[0], refs):
                    continue
                calls = [
                    (lambda xs=xs, os_=os_, c=compiled: c.run(*xs, outputs=os_))
                    for xs, os_ in zip(sets, outs_per_set, strict=True)
                ]
                record_timing(method, *self.timer.time(calls))
                method.batched_us = self.timer.batched(calls)
                compiled.synchronize()
            except Exception as e:
                method.status = "error"
                method.note = one_line(e)
                if "ILLEGAL" in method.note or "LAUNCH_FAILED" in method.note:
                    raise  # the context is gone: nothing after this can run
            finally:
                torch.cuda.synchronize()

    def torch_method(
        self,
        config: Config,
        name: str,
        fn: Callable,
        sets,
        refs,
        cap: float | None = None,
    ) -> None:
        torch = self.torch
        method = Method(name, "torch")
        config.methods.append(method)
        try:
            t = time.perf_counter()
            with time_cap(cap) if cap else contextlib.nullcontext():
                outs = fn(*sets[0])
                torch.cuda.synchronize()
            method.build_s = time.perf_counter() - t
            if not self.check(method, outs, refs):
                return
            calls = [(lambda xs=xs: fn(*xs)) for xs in sets]
            record_timing(method, *self.timer.time(calls))
            method.batched_us = self.timer.batched(calls)
        except CompileTimeout as e:
            method.status = "skipped"
            method.note = f"compile cap: {e}"
        except Exception as e:
            method.note = one_line(e)
            method.status = "skipped" if "CompileTimeout" in method.note else "error"
        finally:
            torch.cuda.synchronize()

    def eager_and_sdpa(self, config: Config, sets, refs) -> None:
        import baselines

        self.torch_method(config, "eager", baselines.EAGER[config.workload], sets, refs)
        if config.workload not in ("gqa", "qknorm_gqa"):
            return
        sdpa_sets = [baselines.sdpa_inputs(xs) for xs in sets]
        for backend_name, backend in baselines.sdpa_backends().items():
            fn = baselines.sdpa_variant(config.workload, backend)
            self.torch_method(config, f"sdpa_{backend_name}", fn, sdpa_sets, refs)

    def compiled(self, config: Config, sets, refs, mode: str | None) -> None:
        import baselines

        torch = self.torch
        name = "compile" if mode is None else "max-autotune"
        cap = min(self.args.compile_cap, self.remaining())
        if cap < 10:
            config.methods.append(
                Method(name, "torch", "skipped", note="time budget spent")
            )
            return
        torch._dynamo.reset()
        options = {"dynamic": False}
        if mode:
            options["mode"] = mode
        fn = torch.compile(baselines.EAGER[config.workload], **options)
        self.torch_method(config, name, fn, sets, refs, cap=cap)


def copy_roofline(timer: Timer) -> float:
    """TB/s of a 1 GiB copy kernel, counting bytes read and written."""
    from mirage_xdsl.runtime.bandwidth import copy_bandwidth

    return copy_bandwidth(timer.graphs) / 1e12


def status(m: Method) -> str:
    return f"{m.median_us:.1f} µs" if m.status == "ok" else m.status


def one_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


# --- report --------------------------------------------------------------------------------


def fmt(us: float | None) -> str:
    return "—" if us is None else f"{us:.1f}"


def markdown(configs: list[Config], copy_tbps: float) -> str:
    """The headline table: the search's result against the best PyTorch form,
    20 calls per graph first, then one call per graph."""
    head = (
        f"| workload | b | ours, {BATCH}/graph | best PyTorch, {BATCH}/graph | speed-up "
        "| ours, 1 call [p10–p90] | best PyTorch, 1 call | speed-up "
        f"| ours, % of copy ({BATCH}/graph) | ours: the search's µGraph "
        f"| hand-written best, {BATCH}/graph | plain, {BATCH}/graph |"
    )
    lines = [head, "|" + " --- |" * 12]
    for c in configs:
        ours, base = c.best_batched("ours"), c.best_batched("torch")
        ours1, base1 = c.best("ours"), c.best("torch")
        hand, plain = c.best_batched("handwritten"), c.best_batched("plain")
        roof = "—"
        if ours is not None and ours.batched_us:
            tbps = c.min_bytes / (ours.batched_us * 1e-6) / 1e12
            roof = f"{100 * tbps / copy_tbps:.0f}%"
        lines.append(
            "| "
            + " | ".join(
                [
                    c.workload,
                    str(c.batch),
                    _batched(ours),
                    _batched(base, named=True),
                    _ratio(base and base.batched_us, ours and ours.batched_us),
                    "—"
                    if ours1 is None
                    else f"{ours1.median_us:.1f} [{ours1.p10_us:.1f}–{ours1.p90_us:.1f}]",
                    "—" if base1 is None else f"{base1.median_us:.1f} ({base1.name})",
                    _ratio(base1 and base1.median_us, ours1 and ours1.median_us),
                    roof,
                    search_cell(c, ours),
                    _batched(hand, named=True),
                    _batched(plain),
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def _batched(m: Method | None, named: bool = False) -> str:
    if m is None or m.batched_us is None:
        return "—"
    return f"{m.batched_us:.1f}" + (f" ({m.name})" if named else "")


def _ratio(base: float | None, ours: float | None) -> str:
    return (
        f"**{base / ours:.2f}×**"
        if base and ours and base >= ours
        else (f"{base / ours:.2f}×" if base and ours else "—")
    )


def search_cell(c: Config, ours: Method | None) -> str:
    """What the search returned and how long it took, or why nothing is there."""
    if ours is None:
        failed = [f"{m.name}: {m.status}" for m in c.methods if m.kind == "ours"]
        return ", ".join(failed) or "—"
    s = c.search
    backend = ours.name.rsplit("/", 1)[-1]
    if not s:
        return backend
    stopped = f", stopped: {s['stopped']}" if s.get("stopped") else ""
    return (
        f"{s['kernels_before']} → {s['kernels_after']} kernels, {backend}; "
        f"search {s['seconds']:.0f} s{stopped}"
    )


def speedups(configs: list[Config]) -> tuple[list[float], list[float]]:
    """Per configuration, best PyTorch time over ours: 20/graph, then 1 call."""
    batched, single = [], []
    for c in configs:
        ours, base = c.best_batched("ours"), c.best_batched("torch")
        if ours and base and ours.batched_us and base.batched_us:
            batched.append(base.batched_us / ours.batched_us)
        ours1, base1 = c.best("ours"), c.best("torch")
        if ours1 and base1:
            single.append(base1.median_us / ours1.median_us)
    return batched, single


def geomean(xs: list[float]) -> float | None:
    return float(np.exp(np.mean(np.log(xs)))) if xs else None


def _mean(xs: list[float]) -> str:
    g = geomean(xs)
    return "—" if g is None else f"{g:.2f}×"


def torch_table(configs: list[Config]) -> str:
    """Every PyTorch form, one call and 20 per graph."""
    forms = (("eager",), ("compile",), ("max-autotune",), ("sdpa_",))
    head = "| workload | b | " + " | ".join(
        f"{f[0].rstrip('_')}, 1 call | {f[0].rstrip('_')}, {BATCH}/graph" for f in forms
    )
    lines = [head + " |", "|" + " --- |" * (2 + 2 * len(forms))]
    for c in configs:
        cells = []
        for names in forms:
            ms = [
                m for m in c.methods if m.kind == "torch" and m.name.startswith(names)
            ]
            ok = [m for m in ms if m.status == "ok"]
            if not ok:
                status = ms[0].status if ms else "—"
                cells += [status, status]
                continue
            one = min(ok, key=lambda m: m.median_us)
            many = min(
                (m for m in ok if m.batched_us is not None),
                key=lambda m: m.batched_us,
                default=None,
            )
            tag = f" ({one.name.removeprefix('sdpa_')})" if names == ("sdpa_",) else ""
            cells += [f"{one.median_us:.1f}{tag}", _batched(many)]
        lines.append(f"| {c.workload} | {c.batch} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def backend_table(configs: list[Config]) -> str:
    """Each of our programs under each backend, beside the best PyTorch time."""
    backends: list[str] = []
    for c in configs:
        for m in c.methods:
            if m.kind != "torch" and "/" in m.name:
                b = m.name.rsplit("/", 1)[1]
                if b not in backends:
                    backends.append(b)
    head = "| workload | b | program | " + " | ".join(f"{b} µs" for b in backends)
    head += " | best PyTorch µs |"
    lines = [head, "|" + " --- |" * (4 + len(backends))]
    for c in configs:
        base = c.best("torch")
        programs: list[str] = []
        for m in c.methods:
            if m.kind != "torch":
                p = m.name.rsplit("/", 1)[0]
                if p not in programs:
                    programs.append(p)
        for p in programs:
            cells = []
            for b in backends:
                m = next((m for m in c.methods if m.name == f"{p}/{b}"), None)
                cells.append(
                    "—"
                    if m is None
                    else (fmt(m.median_us) if m.status == "ok" else m.status)
                )
            best = f"{fmt(base.median_us)} ({base.name})" if base else "—"
            lines.append(
                f"| {c.workload} | {c.batch} | {p} | "
                + " | ".join(cells)
                + f" | {best} |"
            )
    return "\n".join(lines)


def details(configs: list[Config], copy_tbps: float) -> str:
    """Every method of every configuration, with achieved bandwidth."""
    lines = [
        "| workload | b | method | status | median µs | p10 | p90 | TB/s (% of copy) "
        f"| rel. L2 | build s | note | µs, {BATCH}/graph |",
        "|" + " --- |" * 12,
    ]
    for c in configs:
        for m in c.methods:
            err = "" if m.error is None else f"{m.error:.1e}"
            bw = ""
            if m.status == "ok":
                tbps = c.min_bytes / (m.median_us * 1e-6) / 1e12
                bw = f"{tbps:.2f} ({100 * tbps / copy_tbps:.0f}%)"
            lines.append(
                f"| {c.workload} | {c.batch} | {m.kind}/{m.name} | {m.status} | {fmt(m.median_us)} "
                f"| {fmt(m.p10_us)} | {fmt(m.p90_us)} | {bw} | {err} | {m.build_s:.1f} "
                f"| {m.note.replace('|', '/')} | {fmt(m.batched_us)} |"
            )
    return "\n".join(lines)


def plot(configs: list[Config], path: Path) -> str:
    """Bars of µs per call with 20 calls per graph (the headline figure)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "bench.png skipped: matplotlib is not installed"
    series = {
        "ours (the search's µGraph)": lambda c: c.best_batched("ours"),
        "hand-written (best)": lambda c: c.best_batched("handwritten"),
        "eager": lambda c: _named(c, "eager"),
        "compile": lambda c: _named(c, "compile"),
        "max-autotune": lambda c: _named(c, "max-autotune"),
        "SDPA (best)": lambda c: _best_prefix(c, "sdpa_"),
    }
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(configs)), 4.5))
    width = 0.8 / len(series)
    lowest = float("inf")
    for i, (label, pick) in enumerate(series.items()):
        xs, ys = [], []
        for j, c in enumerate(configs):
            m = pick(c)
            if m is not None and m.status == "ok" and m.batched_us:
                xs.append(j + (i - len(series) / 2 + 0.5) * width)
                ys.append(m.batched_us)
        if xs:
            lowest = min(lowest, min(ys))
            ax.bar(xs, ys, width, label=label)
    ax.set_xticks(
        range(len(configs)), [f"{c.workload}\nb={c.batch}" for c in configs], fontsize=8
    )
    ax.set_yscale("log")
    if lowest < float("inf"):
        ax.set_ylim(bottom=lowest / 2)
    ax.set_ylabel(f"µs per call (median, {BATCH} calls per CUDA graph)")
    ax.set_title("GPU time per call, L2 flushed before each call")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return f"wrote {path}"


def _named(c: Config, name: str) -> Method | None:
    return next((m for m in c.methods if m.name == name), None)


def _best_prefix(c: Config, prefix: str) -> Method | None:
    ok = [
        m
        for m in c.methods
        if m.name.startswith(prefix) and m.status == "ok" and m.batched_us is not None
    ]
    return min(ok, key=lambda m: m.batched_us, default=None)


def environment() -> dict[str, str]:
    import torch

    props = torch.cuda.get_device_properties(0)
    env = {
        "gpu": props.name,
        "sms": str(props.multi_processor_count),
        "l2_mb": f"{getattr(props, 'L2_cache_size', 0) / 2**20:.0f}",
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "python": sys.version.split()[0],
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        pass
    return env


# --- dry run (no GPU) ------------------------------------------------------------------------


def search_only(args, workloads: list[str]) -> int:
    """Each configuration's search, as the benchmark runs it, and nothing else:
    its report goes to ``searches.json`` under ``--out``. With
    ``--search-cache``, what finished is kept for a later run even when
    ``--stop-after`` ends this one early."""
    from mirage_xdsl.workloads import WORKLOADS

    begin = time.monotonic()
    done = []
    for workload in workloads:
        for batch in args.batches:
            if (
                args.stop_after is not None
                and time.monotonic() - begin > args.stop_after
            ):
                print(f"bench: {workload} b={batch}: not searched (--stop-after)")
                continue
            config = Config(workload, batch)
            searched(WORKLOADS[workload].module(batch, args.scale), args, config)
            done.append({"workload": workload, "batch": batch, "search": config.search})
            if args.out:
                out = Path(args.out)
                out.mkdir(parents=True, exist_ok=True)
                (out / "searches.json").write_text(json.dumps(done, indent=1))
    print(f"bench: {len(done)} searches in {time.monotonic() - begin:.0f} s")
    return 0


def dry_run(args, workloads: list[str]) -> int:
    """Build and compile our candidates; check the PyTorch baselines on the CPU."""
    from mirage_xdsl.runtime import compile
    from mirage_xdsl.runtime.check import compare
    from mirage_xdsl.workloads import WORKLOADS, random_inputs

    problems = 0
    try:
        import baselines
        import torch
    except ImportError as e:
        baselines = None
        print(f"PyTorch baselines not checked: {e}")
    for name in workloads:
        for batch in args.batches:
            module = WORKLOADS[name].module(batch, args.scale)
            xs = random_inputs(module, args.seed, -0.25, 0.25)
            refs = WORKLOADS[name].reference(*xs)
            for label, _kind, make in candidates(args, name, batch):
                for backend in args.backends:
                    try:
                        compiled = compile(make(), backend=backend, tune=False)
                        print(
                            f"  ok     {name} b={batch} ours/{label}/{backend}: "
                            f"{len(compiled.program.launches)} launch(es)"
                        )
                    except Exception as e:
                        problems += 1
                        print(
                            f"  ERROR  {name} b={batch} ours/{label}/{backend}: {one_line(e)}"
                        )
            if baselines is not None:
                ts = [torch.from_numpy(x.astype(np.float32)) for x in xs]
                outs = baselines.EAGER[name](*ts)
                result = compare([o.numpy() for o in outs], refs, 1e-4)
                problems += not result.ok
                verdict = "ok" if result.ok else "WRONG"
                print(
                    f"  {verdict:6s} {name} b={batch} torch/eager (fp32, CPU): {result.summary()}"
                )
                fn = baselines.sdpa_variant(name, baselines.sdpa_backends()["math"])
                if fn is not None:
                    outs = fn(*baselines.sdpa_inputs(ts))
                    result = compare([o.numpy() for o in outs], refs, 1e-4)
                    problems += not result.ok
                    verdict = "ok" if result.ok else "WRONG"
                    print(
                        f"  {verdict:6s} {name} b={batch} torch/sdpa_math (fp32, CPU): {result.summary()}"
                    )
    print(f"bench --dry-run: {problems} problem(s)")
    return 1 if problems else 0


# --- main --------------------------------------------------------------------------------------


def parse_args(argv):
    from mirage_xdsl.workloads import WORKLOADS

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--only", nargs="+", choices=sorted(WORKLOADS), help="workloads to run"
    )
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument(
        "--scale", type=int, default=1, help="divide the workloads' large dims"
    )
    p.add_argument(
        "--mlir-dir",
        help="folder of µGraphs: <workload>.mlir / <workload>_b<batch>.mlir",
    )
    p.add_argument(
        "--no-search",
        dest="search",
        action="store_false",
        help="skip the search (no 'ours'; plain and hand-written only)",
    )
    p.add_argument(
        "--search-cap",
        type=float,
        default=120,
        help="seconds per search (its budget: the best found by then is used)",
    )
    p.add_argument(
        "--search-measure",
        choices=("auto", "gpu", "none"),
        default="auto",
        help="the search's selection: timed on this GPU (auto, gpu) or the cost model",
    )
    p.add_argument(
        "--search-cache",
        default="none",
        help="search cache folder ('none': every search runs in this run)",
    )
    p.add_argument(
        "--no-compile", action="store_true", help="skip torch.compile (both modes)"
    )
    p.add_argument(
        "--no-max-autotune", action="store_true", help="skip torch.compile max-autotune"
    )
    p.add_argument(
        "--compile-cap", type=float, default=150, help="seconds per torch.compile"
    )
    p.add_argument(
        "--budget",
        type=float,
        default=400,
        help="seconds after which no compilation starts",
    )
    p.add_argument("--reps", type=int, default=200, help="timed repetitions per method")
    p.add_argument("--warmup", type=int, default=20, help="untimed replays first")
    p.add_argument("--rotate", type=int, default=4, help="input sets, used in turn")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--backends",
        nargs="+",
        choices=("triton", "cuda"),
        default=["triton", "cuda"],
        help="code generators to time each of our programs with (Triton autotuned)",
    )
    p.add_argument(
        "--reference-backends",
        nargs="+",
        choices=("triton", "cuda"),
        default=["triton"],
        help="code generators for the plain and hand-written programs",
    )
    p.add_argument(
        "--stop-after",
        type=float,
        help="seconds after which no further configuration or compilation starts "
        "(what ran is reported)",
    )
    p.add_argument(
        "--out", default=os.environ.get("OUT"), help="folder for bench.json/.md/.png"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="no GPU: build and check only"
    )
    p.add_argument(
        "--search-only",
        action="store_true",
        help="run the searches (filling --search-cache) and print their reports; "
        "time nothing else, so a later run can time every form with the searches "
        "served from the cache",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from mirage_xdsl.workloads import WORKLOADS

    workloads = args.only or list(WORKLOADS)
    if args.dry_run:
        return dry_run(args, workloads)
    if args.search_only:
        return search_only(args, workloads)
    import torch

    if not torch.cuda.is_available():
        print("bench: no CUDA device visible to torch; use --dry-run without a GPU")
        return 2
    begin = time.monotonic()
    env = environment()
    print("bench: " + ", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    bench = Bench(args)

    copy_tbps = copy_roofline(bench.timer)
    print(
        f"bench: copy roofline {copy_tbps:.2f} TB/s (a 1 GiB copy kernel, read + write)",
        flush=True,
    )

    configs = [Config(w, b) for w in workloads for b in args.batches]
    inputs = {}
    aborted = ""
    try:
        for c in configs:
            if bench.past_stop():
                print(f"bench: {c.workload} b={c.batch}: not run (--stop-after)")
                continue
            sets, refs = bench.setup(c)
            inputs[(c.workload, c.batch)] = (sets, refs)
            bench.ours(c, sets, refs)
            bench.eager_and_sdpa(c, sets, refs)
            print(
                f"bench: {c.workload} b={c.batch}: "
                + ", ".join(f"{m.name} {status(m)}" for m in c.methods),
                flush=True,
            )
        modes = (
            []
            if args.no_compile
            else [None]
            + ([] if args.no_max_autotune else ["max-autotune-no-cudagraphs"])
        )
        for mode in modes:
            for c in configs:
                if (c.workload, c.batch) not in inputs or bench.past_stop():
                    continue
                sets, refs = inputs[(c.workload, c.batch)]
                bench.compiled(c, sets, refs, mode)
                m = c.methods[-1]
                print(
                    f"bench: {c.workload} b={c.batch}: {m.name} {status(m)} (build {m.build_s:.0f} s) {m.note}",
                    flush=True,
                )
    except Exception as e:  # a kernel fault spoils the CUDA context: report what ran
        aborted = f"; ABORTED: {one_line(e)}"
        print(f"bench: aborted: {one_line(e)}", flush=True)

    table = markdown(configs, copy_tbps)
    pytorch = torch_table(configs)
    by_backend = backend_table(configs)
    detail = details(configs, copy_tbps)
    batched, single = speedups(configs)
    means = (
        f"geometric mean of the speed-up over the best PyTorch form: "
        f"{_mean(batched)} with {BATCH} calls per graph, {_mean(single)} with one "
        f"({len(batched)} of {len(configs)} configurations)"
    )
    summary = (
        f"bench: {len(configs)} configurations in {time.monotonic() - begin:.0f} s on {env['gpu']}; "
        f"copy roofline {copy_tbps:.2f} TB/s; times are medians of {args.reps} CUDA-graph replays, "
        f"L2 flushed before each, {args.rotate} input sets rotated{aborted}"
    )
    print()
    print(detail)
    print()
    print(by_backend)
    print()
    print(pytorch)
    print()
    print(table)
    print()
    print(means)
    print(summary)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench.md").write_text(
            f"{table}\n\n{means}\n\n{summary}\n\n{pytorch}\n\n{by_backend}\n\n{detail}\n"
        )
        report = {
            "environment": env,
            "options": vars(args),
            "copy_tbps": copy_tbps,
            "configs": [asdict(c) for c in configs],
            "geomean_batched": geomean(batched),
            "geomean_single": geomean(single),
            "summary": summary,
        }
        (out / "bench.json").write_text(json.dumps(report, indent=1))
        (out / "search_candidates.json").write_text(
            json.dumps({"rows": TIMED_CANDIDATES}, indent=1)
        )
        print(plot(configs, out / "bench.png"))
    ours_ok = all(c.best("ours") is not None for c in configs) or not args.search
    return 0 if ours_ok and not aborted else 1


if __name__ == "__main__":
    sys.exit(main())
