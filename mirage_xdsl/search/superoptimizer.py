"""Running the search: workers, budget, signals, verification, ranking, cache.

:func:`superoptimize_function` searches one kernel-level function:

1. the generator's tasks (a prefix and a layout) go to worker processes,
   one kernel deeper at a time; each worker instantiates the complete plans
   it finds (concrete grids and loop ranges, the µGraph optimizer, the cost
   model) and screens the cheapest instantiation on random float inputs;
2. the main process verifies survivors with the finite-field verifier,
   cheapest first, until ``verify_top`` pass; with ``measure`` the verified
   ones are timed on the device and the fastest wins, else the cost model
   decides. The input program is always a candidate, so the result is never
   slower than the input by the model's account.

Results are processed in task order and ties broken by program text, so the
answer does not depend on the number of workers (when the search finishes
within its budget). Which tasks the cost bound skips does depend on when
cheaper candidates arrive, but a skipped task could only have produced
candidates above the limit, so the pick stays the same (``bound.py``).
SIGINT and SIGTERM stop the search (a second one aborts), and so does a worker process that dies: what was found so far is
verified and returned, and nothing is written to the cache (a search its
budget stopped is cached with that budget, ``_answers``). The cache itself
is written atomically (``cache.py``), so a process killed at any point leaves
it readable.
"""

from __future__ import annotations

import math
import multiprocessing
import multiprocessing.pool as mp_pool
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from threadpoolctl import threadpool_limits
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.search import cost_model
from mirage_xdsl.search import labels as L
from mirage_xdsl.search.adapters import check_equivalent, close, float_outputs
from mirage_xdsl.search.block_search import Layout, Stats
from mirage_xdsl.search.bound import (
    kernel_bound,
    kernel_floor,
    prefix_cost,
    promising,
)
from mirage_xdsl.search.cache import Cache, default_dir
from mirage_xdsl.search.canonical import program_key
from mirage_xdsl.search.generator import Generator, Prefix, Task, rebased
from mirage_xdsl.search.instantiate import instantiate
from mirage_xdsl.search.optimizer import optimize
from mirage_xdsl.search.options import DEFAULT, SearchOptions
from mirage_xdsl.search.progress import Progress
from mirage_xdsl.search.rules import Tensor
from mirage_xdsl.search.ugraph import KernelOp, UGraph, from_function, to_module

Limit = Any
"""A shared ``multiprocessing.Value('d')``: what a task's prefix plus one
kernel must cost less than (the best screened candidate times the slack)."""

Measure = Callable[[ModuleOp], float]
"""Seconds one run of a module takes on the device (lower is better). A
measure may also have ``key`` (what its timings depend on; measured results
are cached under it), ``describe()`` (details of its last timing) and
``prepare(modules)`` (given every module before the first is timed)."""

SIZES_PER_PLAN = 3
"""Instantiations kept per structural plan: the cheapest, and the next
cheapest of each other grid and for-loop size. The cost model is least sure
about how much parallelism pays (a split-K or FlashDecoding grid of 64
blocks against one of 512), so those variants are verified and, on a GPU,
timed rather than decided by the model alone."""


@dataclass(frozen=True)
class Candidate:
    cost: float
    graph: UGraph
    screened: bool

    def order(self) -> tuple:
        return (self.cost, self.graph.kernels, repr(self.graph))


@dataclass
class Report:
    """What a search did; printed by the pass."""

    function: str
    explored: int = 0
    unexplored: int = 0
    """Block-level ops of rounds that the budget or the class cap cut short,
    never tried (``block_search.Stats.unexplored``): ``explored`` plus this
    is a lower bound on the graphs a stopped search's space holds."""
    pruned: int = 0
    complete: int = 0
    screened: int = 0
    verified: int = 0
    rejected: int = 0
    tasks: list[int] = field(default_factory=list)
    """Tasks (a prefix and a layout or library op) made per kernel depth, once
    the cost bound has dropped what it can when making them: the size of the
    space each depth searches."""
    bounded: int = 0
    """Deeper prefixes dropped because no completion could beat the best
    µGraph already found (``bound.py``)."""
    skipped: int = 0
    """Tasks not run because their prefix's cost plus the least their own
    kernel costs reached the limit (``bound.py``): when the tasks were made,
    or when a worker came to them after a cheaper µGraph was found."""
    input_cost: float = 0.0
    best_cost: float = 0.0
    kernels_before: int = 0
    kernels_after: int = 0
    seconds: float = 0.0
    stopped: str = ""
    cached: bool = False
    verifier: str = ""
    measured_by: str = ""
    """What timed the candidates (``gpu:<device>:triton-<version>``), or empty
    when the cost model chose."""
    measured: list[dict] = field(default_factory=list)
    """Every timed candidate: kernels, the cost model's estimate, the measured
    time per call and backend, and its program text (what calibrating the
    cost model refits against); the chosen one has ``chosen: true``."""

    def summary(self) -> str:
        speedup = self.input_cost / self.best_cost if self.best_cost else 1.0
        status = f", stopped: {self.stopped}" if self.stopped else ""
        cached = " (cached)" if self.cached else ""
        return (
            f"superoptimize @{self.function}{cached}: {self.explored} graphs explored, "
            f"{self.pruned} pruned by abstract expression, {self.bound_summary()}"
            f"{self.complete} complete, {self.screened} passed screening, "
            f"{self.verified} verified ({self.verifier or 'none'}); "
            f"kernels {self.kernels_before} -> {self.kernels_after}; "
            f"cost {self.input_cost * 1e6:.1f} us -> {self.best_cost * 1e6:.1f} us "
            f"({speedup:.2f}x){self.measured_summary()}; {self.seconds:.1f} s{status}"
        )

    def bound_summary(self) -> str:
        if not (self.bounded or self.skipped):
            return ""
        return (
            f"{self.bounded} deeper prefixes and {self.skipped} tasks "
            "cut by the cost bound, "
        )

    def measured_summary(self) -> str:
        chosen = [m for m in self.measured if m.get("chosen")]
        first = [m for m in self.measured if m.get("input")]
        if not chosen or chosen[0].get("time_us") is None:
            return ""
        c = chosen[0]
        text = f"; measured {c['time_us']:.1f} us ({c['backend']})"
        if first and first[0].get("time_us"):
            text += f", input {first[0]['time_us']:.1f} us"
        return text + f", {len(self.measured)} timed"

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Outcome:
    graph: UGraph | None
    """The light graph of the result (None when it came from the cache)."""
    function: func.FuncOp
    report: Report
    candidates: list[Candidate] = field(default_factory=list)


# --- worker side -------------------------------------------------------------


class Worker:
    """Everything a process needs to run tasks, rebuilt from program text."""

    def __init__(self, text: str, options: SearchOptions, limit: Limit | None = None):
        from mirage_xdsl.ir.context import make_context
        from mirage_xdsl.ir.diagnostics import parse
        from mirage_xdsl.semantics.inputs import random_inputs

        self.module = parse(make_context(), text, "<search>")
        self.function = next(
            op for op in self.module.ops if isinstance(op, func.FuncOp)
        )
        self.options = options
        self.limit = limit
        self.generator = Generator(self.function, options)
        g = self.generator
        self.full_args = [
            Tensor(shape, labels, None)
            for shape, labels in zip(
                g.program.inputs,
                (g.full_axes.labels[a] for a in self.function.args),
                strict=True,
            )
        ]
        self.inputs = random_inputs(self.module, options.seed)
        self.refs = float_outputs(self.module, self.inputs)

    def finish(self, ug: UGraph) -> tuple[float, UGraph] | None:
        optimized = optimize(ug, self.options.blockdims)
        if optimized is None:
            return None
        return cost_model.cost(optimized), optimized

    def screen(self, ug: UGraph) -> bool:
        try:
            return close(float_outputs(to_module(ug), self.inputs), self.refs)
        except Exception:
            return False

    def run(self, task: Task, deadline: float):
        if self.limit is not None and not promising(
            task.cost, self.limit.value, task.next_kernel
        ):
            return [], [], Stats(), True
        result = self.generator.run(task, deadline)
        plans, prefixes = rebased(task, result)
        g = self.generator
        found: list[Candidate] = []
        for plan in plans:
            best = instantiate(
                plan,
                g.program.name,
                g.program.dtype,
                self.full_args,
                g.full_axes.sizes,
                self.options,
                self.finish,
            )
            if best:
                screened = self.screen(best[0][1])
                found += [
                    Candidate(cost, ug, screened) for cost, ug in size_variants(best)
                ]
        return found, prefixes, result.stats, False

    def prefix_cost(self, prefix: Prefix) -> float:
        g = self.generator
        return prefix_cost(g, prefix, self.full_args, self.options, self.finish)


def size_variants(
    instantiations: list[tuple[float, UGraph]],
) -> list[tuple[float, UGraph]]:
    """The cheapest instantiation of a plan, then the cheapest of each other
    grid and for-loop size, up to :data:`SIZES_PER_PLAN`. The variants share the
    cheapest one's screening: they compute the same structure, and the
    verifier checks each at full shapes anyway."""
    out: list[tuple[float, UGraph]] = []
    seen: set[tuple] = set()
    for cost, ug in instantiations:
        sizes = _sizes(ug)
        if sizes not in seen:
            seen.add(sizes)
            out.append((cost, ug))
        if len(out) == SIZES_PER_PLAN:
            break
    return out


def _sizes(ug: UGraph) -> tuple:
    """The grid and for-loop range of each customized kernel."""
    return tuple(
        (op.graph.grid, op.graph.forloop) for op in ug.ops if op.graph is not None
    )


_WORKER: Worker | None = None


def one_blas_thread() -> None:
    """Keep this process's numpy (BLAS, OpenMP) to one thread.

    The search runs one worker process per core, and each screens candidates
    with full-shape matmuls; left alone, every worker's BLAS starts a thread
    per core too. On the 16-core GPU machine that oversubscription made the
    gqa b = 8 search spend 46 s on the first depth instead of finishing both
    in 32 s."""
    threadpool_limits(1)


def _init_worker(text: str, options: SearchOptions, limit: Limit | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _exit_with_parent(os.getppid())
    one_blas_thread()
    global _WORKER
    _WORKER = Worker(text, options, limit)


def _exit_with_parent(parent: int) -> None:
    """End this worker when the search process is gone (killed with SIGKILL,
    say): the pool's pipes stay open in the workers themselves, so an orphan
    would otherwise run its task to the deadline and then wait forever."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _run_chunk(chunk: list[tuple[Task, float]]) -> list:
    assert _WORKER is not None
    return [_WORKER.run(*args) for args in chunk]


def _cost_chunk(chunk: list[Prefix]) -> list[float]:
    assert _WORKER is not None
    return [_WORKER.prefix_cost(p) for p in chunk]


# --- main side -----------------------------------------------------------------


class _Stop:
    """A stop request: the first signal asks for the best so far, a second aborts."""

    def __init__(self) -> None:
        self.reason = ""

    def __call__(self, signum: int, frame: object) -> None:
        if self.reason.startswith("SIG"):
            raise KeyboardInterrupt
        self.reason = signal.Signals(signum).name


@contextmanager
def _signals(stop: _Stop) -> Iterator[None]:
    """Turn SIGINT/SIGTERM into a stop request (main thread only)."""
    try:
        old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _tasks(
    generator: Generator,
    frontier: list[Prefix],
    final: bool,
    costs: Mapping[Prefix, float] = MappingProxyType({}),
    limit: float = math.inf,
) -> list[Task | None]:
    """One task per distinct prefix (by signature) and item; the prefixes
    that share a signature ride along as the task's alternates, and the task
    carries the least of their costs and the least its kernel can cost.
    A task that cannot get under ``limit`` is None (counted, not run)."""
    groups: dict[tuple, list[Prefix]] = {}
    for p in frontier:
        sig = generator.signature(p)
        if sig is not None:
            groups.setdefault(sig, []).append(p)
    ranked = []
    for g, (first, *rest) in enumerate(groups.values()):
        items = sorted(generator.items(first, final), key=_combines_first)
        cost = min(costs.get(p, 0.0) for p in (first, *rest))
        for i, item in enumerate(items):
            bound = kernel_bound(generator, item)
            task = (
                Task(first, item, final, tuple(rest), cost, bound)
                if promising(cost, limit, bound)
                else None
            )
            ranked.append(((_combines_first(item), i, g), task))
    ranked.sort(key=lambda x: x[0])
    return [task for _, task in ranked]


def _combines_first(item: Layout | KernelOp) -> int:
    """Kernels that add up a prefix's partial sums (a for-loop over the parts)
    come before everything else, and every prefix gets its turn before any
    gets its next: a budget that ends mid-depth has then tried each prefix's
    likeliest completion (FlashDecoding's combine, split-K's sum) rather than
    all of the first prefix's."""
    loop = getattr(item, "loop", None)
    return 0 if loop is not None and L.is_part(loop) else 1


CHUNK = 4
"""Tasks sent to a worker at a time: fewer round trips, still balanced."""

POLL_SECONDS = 0.2
"""How often the main process, waiting on workers, checks for a stop request,
the budget and a dead worker: a task can run long, and Ctrl-C must not wait
for it."""


class _Workers:
    """A fork pool that can tell when one of its processes died.

    ``multiprocessing.Pool`` replaces a worker killed from outside but loses the
    task it was running, so waiting for that result would hang forever; the
    main process checks the processes it started instead.
    """

    def __init__(
        self,
        count: int,
        text: str,
        options: SearchOptions,
        limit: Limit | None = None,
    ):
        before = set(multiprocessing.active_children())
        ctx = multiprocessing.get_context("fork")
        self.pool = ctx.Pool(count, _init_worker, (text, options, limit))
        self.processes = set(multiprocessing.active_children()) - before

    def dead(self) -> str:
        """Why a worker is gone (``""`` while all live)."""
        for p in sorted(self.processes, key=lambda p: p.pid or 0):
            if not p.is_alive():
                code = p.exitcode or 0
                how = f"exit {code}"
                if -code in signal.valid_signals():
                    how = signal.Signals(-code).name
                return f"worker {p.pid} died ({how})"
        return ""

    def results(
        self,
        args: list,
        stop: _Stop,
        deadline: float,
        run: Callable[[list], list] = _run_chunk,
    ) -> Iterator:
        """Task results in order, until done, stopped, out of budget or broken."""
        chunks = [args[i : i + CHUNK] for i in range(0, len(args), CHUNK)]
        it = self.pool.imap(run, chunks)
        for _ in chunks:
            chunk = self._wait(it, stop, deadline)
            if chunk is None:
                return
            yield from chunk

    def _wait(self, it: Any, stop: _Stop, deadline: float) -> list | None:
        """The next chunk's results, or None once the search must end."""
        while True:
            try:
                return it.next(timeout=POLL_SECONDS)
            except multiprocessing.TimeoutError:
                if stop.reason or time.monotonic() > deadline:
                    return None
                if lost := self.dead():
                    stop.reason = lost
                    return None

    def close(self) -> None:
        if self.dead():
            self._abandon()
            return
        self.pool.terminate()
        self.pool.join()

    def _abandon(self) -> None:
        """End a pool one of whose processes was killed from outside.

        A worker killed while it waited for a task dies holding the task
        queue's read lock, and ``Pool.terminate`` (also run at exit) takes that
        lock first, so it would wait forever. Instead the pool stops replacing
        workers, every process it has is killed and reaped, and its own
        clean-up is cancelled; its threads are daemons and end with the process.
        """
        pool = self.pool
        pool._worker_handler._state = mp_pool.TERMINATE
        pool._state = mp_pool.TERMINATE
        pool._change_notifier.put(None)
        pool._worker_handler.join(timeout=5)
        processes = [*pool._pool, *self.processes]
        for p in processes:
            if p.is_alive():
                p.kill()
        for p in processes:
            p.join(timeout=5)
        pool._terminate.cancel()


def _search(
    text: str,
    options: SearchOptions,
    deadline: float,
    stop: _Stop,
    progress: Progress,
    report: Report,
    slack: float = 1.0,
) -> list[Candidate]:
    """Complete candidates, one kernel deeper at a time; a deeper prefix is
    kept only if it may cost under ``slack`` times the best found so far."""
    # The bound the workers skip tasks by, lowered as candidates come in.
    limit = multiprocessing.get_context("fork").Value("d", math.inf, lock=False)
    shared = limit if options.bound else None
    local = Worker(text, options, shared)
    workers = options.workers()
    pool = _Workers(workers, text, options, shared) if workers > 1 else None
    candidates: list[Candidate] = []
    frontier = [Prefix()]
    costs_of: dict[Prefix, float] = {}

    def costs(prefixes: list[Prefix]) -> list[float]:
        if pool is None:
            return [local.prefix_cost(p) for p in prefixes]
        return list(pool.results(prefixes, stop, deadline, _cost_chunk))

    try:
        for depth in range(1, options.max_kernels + 1):
            final = depth == options.max_kernels
            if depth > 1 and options.bound:
                costs_of = _bounded(frontier, depth, limit.value, costs, report)
                frontier = list(costs_of)
                if not frontier:
                    break
            tasks = _tasks(local.generator, frontier, final, costs_of, limit.value)
            report.skipped += sum(not t for t in tasks)
            tasks = [t for t in tasks if t]
            report.tasks.append(len(tasks))
            frontier = []
            args = [(t, deadline) for t in tasks]
            results = (
                pool.results(args, stop, deadline)
                if pool
                else (local.run(*a) for a in args)
            )
            for done, (found, prefixes, stats, skipped) in enumerate(results, 1):
                _count(report, stats)
                report.skipped += skipped
                candidates += found
                if options.bound:
                    limit.value = min(
                        [limit.value, *(c.cost * slack for c in found if c.screened)]
                    )
                report.complete += len(found)
                report.screened += sum(c.screened for c in found)
                frontier += prefixes
                progress.update(
                    f"kernels {depth}/{options.max_kernels}: task {done}/{len(tasks)}, "
                    f"{report.explored} explored, {report.pruned} pruned, "
                    f"{report.screened} candidates"
                )
                if stop.reason or time.monotonic() > deadline:
                    break
            if stop.reason or time.monotonic() > deadline:
                report.stopped = stop.reason or "budget"
                return candidates
            if not frontier:
                break
    finally:
        if pool is not None:
            pool.close()
    return candidates


def _bounded(
    frontier: list[Prefix],
    depth: int,
    limit: float,
    costs: Callable[[list[Prefix]], list[float]],
    report: Report,
) -> dict[Prefix, float]:
    """The prefixes that may still lead under ``limit`` (the best complete
    µGraph so far times the slack; ``bound.py``), with their costs; the
    others are counted in the report. When ``depth`` kernels cannot get
    under it whatever they are, no prefix is costed at all."""
    kept: dict[Prefix, float] = {}
    if depth * kernel_floor() < limit:
        for p, cost in zip(frontier, costs(frontier), strict=False):
            if promising(cost, limit):
                kept[p] = cost
    report.bounded += len(frontier) - len(kept)
    return kept


def _count(report: Report, stats: Stats) -> None:
    report.explored += stats.explored
    report.unexplored += stats.unexplored
    report.pruned += stats.pruned
    if stats.stopped and not report.stopped:
        report.stopped = "budget"


def _pick(
    program: ModuleOp,
    input_graph: UGraph,
    input_cost: float,
    candidates: list[Candidate],
    options: SearchOptions,
    measure: Measure | None,
    stop: _Stop,
    report: Report,
) -> tuple[float, UGraph]:
    top = (
        options.verify_top
        if measure is None
        else max(options.verify_top, options.measure_top)
    )
    want = 1 if stop.reason else top  # a stop ends it early
    ceiling = input_cost * _slack(measure)
    ranked = [
        c
        for c in sorted((c for c in candidates if c.screened), key=Candidate.order)
        if c.cost < ceiling
    ]
    if measure is not None:
        ranked = by_kernel_count(distinct(ranked))
    verified = [
        (c.cost, c.graph) for c in _verified(program, ranked, want, options, report)
    ]
    pool = [(input_cost, input_graph), *verified]
    if measure is not None:
        return _measured_pick(pool, measure, report)
    return min(pool, key=lambda x: (x[0], x[1].kernels))


def shape_key(graph: UGraph) -> tuple:
    """How a µGraph tiles the work: per kernel, its operands, grid, for-loop,
    and input and output maps. Candidates that share it move the same tiles
    and differ only in how the block computes on them (op order, ``rms``
    against ``mean`` then ``sqrt``), which times within noise of each other."""
    out = []
    for op in graph.ops:
        g = op.graph
        if g is None:
            out.append((op.kind, op.operands, op.attrs))
            continue
        out.append(
            (
                op.operands,
                g.grid,
                g.forloop,
                tuple(sorted((i.source, i.imap, i.fmap) for i in g.inputs)),
                tuple(sorted(omap for _, omap in g.outputs)),
            )
        )
    return tuple(out)


def distinct(ranked: list[Candidate]) -> list[Candidate]:
    """``ranked`` without candidates whose :func:`shape_key` an earlier
    (cheaper) one has: the timed pool is small, each slot should be a
    different kernel."""
    seen: set[tuple] = set()
    out = []
    for c in ranked:
        key = shape_key(c.graph)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


MEASURED_SLACK = 2.0
"""When a GPU decides, candidates the cost model puts up to this many times the
input's cost are still timed: within one program its ratios are off by about
that much (qknorm_gqa's one-kernel forms, costed at 0.8 of the input, took
twice the input's time on the H100), and the input is always timed beside
them, so a candidate slower than the input is never chosen."""


def _slack(measure: Measure | None) -> float:
    """How far above the best (or the input) a candidate may cost and still
    count: 1 when the cost model decides, MEASURED_SLACK when a GPU does."""
    return 1.0 if measure is None else MEASURED_SLACK


PER_KERNEL_COUNT = 2
"""Candidates of each kernel count moved to the front of the measured pool."""


def by_kernel_count(ranked: list[Candidate]) -> list[Candidate]:
    """``ranked`` with the cheapest :data:`PER_KERNEL_COUNT` candidates of each
    kernel count first (in cost order), then the rest.

    For measured selection: the cost model's sharpest error is the price of a
    kernel boundary (a launch against more blocks in flight, as split-K and
    FlashDecoding trade), so the timed pool holds each structure's best
    rather than eight sizes of the one the model likes most.

    Its next sharpest is a library op's speed: the model prices it as a
    vendor kernel, but it runs as the default lowering's kernel (RMSNorm +
    linear's ``matmul``-then-combine pairs, costed 17.1 µs, took 28.7 µs on
    the H100). So the cheapest candidate of each kernel count made of
    customized kernels only (split-K, costed 17.6 µs, took 19.8) leads too."""
    lead: list[int] = []
    seen: dict[int, int] = {}
    customized: set[int] = set()
    for i, c in enumerate(ranked):
        count = c.graph.kernels
        only_customized = all(op.graph is not None for op in c.graph.ops)
        if seen.get(count, 0) < PER_KERNEL_COUNT:
            seen[count] = seen.get(count, 0) + 1
            lead.append(i)
            if only_customized:
                customized.add(count)
        elif only_customized and count not in customized:
            customized.add(count)
            lead.append(i)
    chosen = set(lead)
    return [ranked[i] for i in lead] + [
        c for i, c in enumerate(ranked) if i not in chosen
    ]


PARALLEL_VERDICT_SECONDS = 2.0
"""A first verdict slower than this sends the rest to a pool of processes."""


def _verified(
    program: ModuleOp,
    ranked: list[Candidate],
    want: int,
    options: SearchOptions,
    report: Report,
) -> list[Candidate]:
    """The first ``want`` of ``ranked`` that the verifier accepts.

    Verdicts are taken in rank order, so the answer is the same as verifying
    one by one. When one verdict takes long (full shapes, many blocks) and
    there are cores to spare, the rest are verified in waves across forked
    worker processes. Forked, not spawned: a spawned process re-runs the
    user's main script, which need not guard its call to the search. The
    search's own worker pool is closed (and its threads joined) by then."""
    from mirage_xdsl.ir.printing import module_text

    program_text = module_text(program)
    out: list[Candidate] = []
    position = 0
    executor = None
    try:
        while position < len(ranked) and len(out) < want:
            width = _wave_width(executor, want - len(out), options)
            wave = ranked[position : position + width]
            position += len(wave)
            jobs = [
                (module_text(to_module(c.graph)), program_text, options) for c in wave
            ]
            started = time.monotonic()
            results = list(
                executor.map(_verify_one, jobs) if executor else map(_verify_one, jobs)
            )
            for c, (equivalent, method) in zip(wave, results, strict=True):
                if len(out) >= want:
                    break
                report.verifier = method
                if equivalent:
                    out.append(c)
                    report.verified += 1
                else:
                    report.rejected += 1
            slow = time.monotonic() - started > PARALLEL_VERDICT_SECONDS
            workers = min(options.workers(), want - len(out), len(ranked) - position)
            if executor is None and slow and workers > 1:
                executor = _verifier_pool(workers)
    finally:
        if executor is not None:
            executor.shutdown(cancel_futures=True)
    return out


def _wave_width(executor: Any, needed: int, options: SearchOptions) -> int:
    if executor is None:
        return 1
    return max(1, min(options.workers(), needed))


def _verifier_pool(workers: int):
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=one_blas_thread,
    )


def _verify_one(job: tuple[str, str, SearchOptions]) -> tuple[bool, str]:
    from mirage_xdsl.ir.context import make_context
    from mirage_xdsl.ir.diagnostics import parse

    candidate_text, program_text, options = job
    ctx = make_context()
    check = check_equivalent(
        parse(ctx, candidate_text, "<candidate>"),
        parse(ctx, program_text, "<program>"),
        options.trials,
        options.seed,
    )
    return check.equivalent, check.method


def _measured_pick(
    pool: list[tuple[float, UGraph]], measure: Measure, report: Report
) -> tuple[float, UGraph]:
    """Time every candidate (the input first) and keep the fastest. A measure
    with ``prepare`` gets every candidate first, to compile them all at once."""
    describe = getattr(measure, "describe", None)
    timed = []
    from mirage_xdsl.ir.printing import module_text

    modules = [to_module(graph) for _, graph in pool]
    if prepare := getattr(measure, "prepare", None):
        prepare(modules)
    for i, ((cost, graph), module) in enumerate(zip(pool, modules, strict=True)):
        seconds = measure(module)
        entry = {
            "input": i == 0,
            "kernels": graph.kernels,
            "cost_us": cost * 1e6,
            "program": module_text(module),
        }
        entry.update(describe() if describe else {"time_us": seconds * 1e6})
        report.measured.append(entry)
        timed.append((seconds, i))
    _, best = min(timed)
    report.measured[best]["chosen"] = True
    report.measured_by = str(getattr(measure, "key", "measure"))
    return pool[best]


def superoptimize_function(
    function: func.FuncOp,
    options: SearchOptions = DEFAULT,
    measure: Measure | None = None,
    cache_dir: str | None = None,
    progress: Progress | None = None,
) -> Outcome:
    """Search for the best verified µGraph equivalent to a kernel-level function."""
    from mirage_xdsl.ir.printing import module_text

    start = time.monotonic()
    program = ModuleOp([function.clone()])
    text = module_text(program)
    name = function.sym_name.data
    input_graph = from_function(function)
    input_cost = cost_model.cost(input_graph)
    report = Report(name, input_cost=input_cost, kernels_before=input_graph.kernels)
    directory = None if cache_dir == "none" else cache_dir or default_dir()
    cache = Cache(directory) if directory is not None else None
    measure_key = getattr(measure, "key", None) if measure is not None else ""
    key = program_key(
        text, {**options.key(), **({"measure": measure_key} if measure_key else {})}
    )
    cacheable = measure is None or measure_key is not None
    hit = cache.get(key) if cache and cacheable else None
    if hit is not None and _answers(hit, options.budget):
        return _from_cache(hit, report, start)
    progress = progress or Progress()
    stop = _Stop()
    with _signals(stop):
        candidates = _search(
            text,
            options,
            start + options.budget,
            stop,
            progress,
            report,
            _slack(measure),
        )
        progress.close()
        best_cost, best = _pick(
            program, input_graph, input_cost, candidates, options, measure, stop, report
        )
    report.best_cost = best_cost
    report.kernels_after = best.kernels
    report.seconds = time.monotonic() - start
    fn = _function_of(best)
    if cache and cacheable and report.stopped in ("", "budget"):
        from mirage_xdsl.ir.printing import module_text as text_of

        entry = {"program": text_of(ModuleOp([fn.clone()])), "report": report.to_json()}
        if report.stopped:
            entry["budget"] = options.budget
        cache.put(key, entry)
    return Outcome(best, fn, report, candidates)


def _answers(entry: dict, budget: float) -> bool:
    """Whether a cached result answers a search with ``budget`` seconds: a
    complete search always does; one its budget stopped answers only searches
    given no more time than it had, so a longer budget searches again (and
    replaces the entry). A search a signal or a lost worker stopped is never
    cached."""
    return "budget" not in entry or budget <= entry["budget"]


def _function_of(ug: UGraph) -> func.FuncOp:
    module = to_module(ug)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    fn.detach()
    return fn


def _from_cache(entry: dict, report: Report, start: float) -> Outcome:
    from mirage_xdsl.ir.context import make_context
    from mirage_xdsl.ir.diagnostics import parse

    module = parse(make_context(), entry["program"], "<cache>")
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    fn.detach()
    # An entry written by another version may carry fields this one dropped.
    known = {f.name for f in fields(Report)}
    saved = Report(**{k: v for k, v in entry["report"].items() if k in known})
    saved.cached = True
    saved.seconds = time.monotonic() - start
    return Outcome(None, fn, saved)
