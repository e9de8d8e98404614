"""Running the search: one kernel deeper at a time, then the pick and the cache.

:func:`superoptimize_function` searches one kernel-level function:

1. the generator's tasks (a prefix and a layout) go to worker processes
   (``pool.py``; or any executor, a Dask cluster's: ``dispatch.py``), one
   kernel deeper at a time; each worker instantiates the
   complete plans it finds and screens the cheapest instantiation on random
   float inputs (``worker.py``, ``screening.py``);
2. the main process verifies survivors with the finite-field verifier,
   cheapest first, until ``verify_top`` pass; with ``measure`` the verified
   ones are timed on the device and the fastest wins, else the cost model
   decides (``ranking.py``). The input program and the other default builds
   are always candidates, so the result is never slower than the best of
   them by the model's (or the device's) account.

Generation stops when all but the search's reserve of its budget is spent
(``budget.reserve``), so what it found can still be verified and timed; the
choosing keeps to the whole budget. Every phase looks at the clock: making
the tasks of a depth, costing prefixes, running tasks, verifying, timing.

Results are processed in task order and ties broken by program text, so the
answer does not depend on the number of workers (when the search finishes
within its budget). Which tasks the cost bound skips does depend on when
cheaper candidates arrive, but a skipped task could only have produced
candidates above the limit, so the pick stays the same (``bound.py``).
SIGINT and SIGTERM stop the search (a second one aborts), and so does a
worker process that dies (``budget.py``): what was found so far is verified
and returned, and nothing is written to the cache (a search its budget
stopped is cached with that budget, ``_answers``, and answers a segment's
search that is guaranteed no more, ``served_by``; a longer search times its
pick beside the input as a baseline). The cache itself is
written atomically (``cache.py``), so a process killed at any point leaves
it readable; its key holds the version of the code (``version.py``).
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import fields

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.search import cost_model
from mirage_xdsl.search import labels as L
from mirage_xdsl.search.block_layout import Layout
from mirage_xdsl.search.bound import kernel_floor, promising
from mirage_xdsl.search.budget import Stop, reserve, signals
from mirage_xdsl.search.cache import Cache, default_dir, search_key
from mirage_xdsl.search.dispatch import executor_for
from mirage_xdsl.search.options import DEFAULT, SearchOptions
from mirage_xdsl.search.pool import in_order
from mirage_xdsl.search.progress import Progress
from mirage_xdsl.search.ranking import Measure, pick, slack
from mirage_xdsl.search.report import Candidate, Outcome, Report
from mirage_xdsl.search.stats import Stats
from mirage_xdsl.search.task import Prefix, Task
from mirage_xdsl.search.ugraph import KernelOp, UGraph, from_function, to_module
from mirage_xdsl.search.worker import (
    Extension,
    Worker,
    extension_chunk,
    run_chunk,
    signature_chunk,
)

__all__ = ["Candidate", "Measure", "Outcome", "Report", "superoptimize_function"]


def _tasks(
    frontier: list[Prefix],
    signatures: Iterable[tuple | None],
    extensions: Callable[[list[tuple[Prefix, bool]]], Iterable[list[Extension]]],
    final: bool,
    cost_on_workers: bool = False,
    limit: float = math.inf,
    due: Callable[[], bool] = lambda: False,
) -> list[Task | None]:
    """One task per distinct prefix (by ``signatures``, each prefix's
    :meth:`Generator.signature`) and item; the prefixes that share a
    signature ride along as the task's alternates, and the task carries the
    least its kernel can cost. A task whose kernel alone cannot get under
    ``limit`` is None (counted, not run). With ``cost_on_workers`` the
    worker running a task costs its prefixes first and skips it if they
    leave no room (:meth:`Worker.task_cost`): costing every prefix of a
    depth before any of its tasks ran took seconds (5.3 s of a 12 s share
    for an attention's 1752 two-kernel prefixes), and the likeliest
    completions come first.

    Both the signatures and the ``extensions`` of each group's first prefix
    replay prefixes, which takes long at depth 2 (seconds for a masked
    attention's hundreds of prefixes): the search computes them on its
    workers, in order, and once ``due`` says the time is up the tasks made
    so far are returned."""
    groups: dict[tuple, list[Prefix]] = {}
    for p, sig in zip(frontier, signatures, strict=False):
        if due():
            break
        if sig is not None:
            groups.setdefault(sig, []).append(p)
    firsts = [(first, final) for first, *_ in groups.values()]
    ranked = []
    for g, ((first, *rest), found) in enumerate(
        zip(groups.values(), extensions(firsts), strict=False)
    ):
        if due():
            break
        items = sorted(found, key=lambda e: _combines_first(e[0]))
        cost = None if cost_on_workers else 0.0
        for i, (item, bound) in enumerate(items):
            task = (
                Task(first, item, final, tuple(rest), cost, bound)
                if promising(0.0, limit, bound)
                else None
            )
            ranked.append(((_combines_first(item), i, g), task))
    ranked.sort(key=lambda x: x[0])
    return [task for _, task in ranked]


DEPTH_SHARE = 0.5
"""The most of the time left that the tasks of a depth take when a deeper
depth follows and a µGraph has been found; the tasks it did not finish run
once the deeper depths are done (a depth that has found none goes on). A
masked attention's one-kernel depth took 6.5 s on two cores, most of it in
one task, and its share of a 30 s budget ended before the second depth
began: the two-kernel split over the keys, which the second depth finds in
its first tasks, was never tried."""


def depth_deadline(deadline: float) -> float:
    """When the tasks of a depth with a deeper one after it stop."""
    now = time.monotonic()
    return now + DEPTH_SHARE * max(deadline - now, 0.0)


def _combines_first(item: Layout | KernelOp) -> int:
    """Kernels that add up a prefix's partial sums (a for-loop over the parts)
    come before everything else, and every prefix gets its turn before any
    gets its next: a budget that ends mid-depth has then tried each prefix's
    likeliest completion (FlashDecoding's combine, split-K's sum) rather than
    all of the first prefix's."""
    loop = getattr(item, "loop", None)
    return 0 if loop is not None and L.is_part(loop) else 1


def _search(
    text: str,
    options: SearchOptions,
    deadline: float,
    stop: Stop,
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
    pool = executor_for(text, options, shared)
    candidates: list[Candidate] = []
    frontier = [Prefix()]

    def on_workers(fn: Callable[[list], list], items: list) -> Iterator:
        """``fn`` over ``items`` on the pool, in order, until the deadline;
        here without one, or for one item (the first depth's empty prefix)."""
        if pool is None or len(items) < 2:
            return (r for x in items if not stop.due(deadline) for r in fn([x], local))
        return in_order(pool, fn, items, stop, deadline)

    def due() -> bool:
        return stop.due(deadline)

    def run(
        tasks: list[Task], until: float, depth: int, seen: set[str] | None = None
    ) -> tuple[list[Prefix], list[Task]]:
        """Run ``tasks`` until ``until``: the deeper prefixes they found,
        and the tasks not run to their end (none, or those from the first
        one stopped). A candidate whose µGraph is in ``seen`` is one a
        stopped task found already."""
        prefixes: list[Prefix] = []
        args = [(t, until) for t in tasks]
        results = (
            in_order(pool, run_chunk, args, stop, until)
            if pool
            else (local.run(*a) for a in args if not stop.due(until))
        )
        done, cut = 0, None
        for done, result in enumerate(results, 1):
            if result.stats.stopped and not stop.due(deadline):
                result.stats.stopped = False  # stopped for the depth, resumed later
                cut = done - 1 if cut is None else cut
            _count(report, result.stats)
            report.skipped += result.skipped
            report.failures += result.failures
            found = result.found
            if seen is not None:
                found = [c for c in found if repr(c.graph) not in seen]
            candidates.extend(found)
            if options.bound:
                limit.value = min(
                    [limit.value, *(c.cost * slack for c in found if c.screened)]
                )
            report.complete += len(found)
            report.screened += sum(c.screened for c in found)
            prefixes += result.prefixes
            best = min((c.cost for c in candidates if c.screened), default=None)
            progress.update(
                f"kernels {depth}/{options.max_kernels}: task {done}/{len(tasks)}, "
                f"{report.explored} explored, {report.pruned} pruned, "
                f"{report.screened} candidates"
                + (f", best {best * 1e6:.1f} us" if best is not None else "")
            )
            if stop.due(until):
                break
        return prefixes, tasks[done if cut is None else cut :]

    unfinished: list[tuple[int, list[Task]]] = []
    try:
        for depth in range(1, options.max_kernels + 1):
            final = depth == options.max_kernels
            if depth > 1 and options.bound and depth * kernel_floor() >= limit.value:
                report.bounded += len(frontier)  # no prefix can get under it
                break
            tasks = _tasks(
                frontier,
                on_workers(signature_chunk, frontier),
                functools.partial(on_workers, extension_chunk),
                final,
                depth > 1 and options.bound,
                limit.value,
                due,
            )
            report.skipped += sum(not t for t in tasks)
            tasks = [t for t in tasks if t]
            report.tasks.append(len(tasks))
            until = deadline if final else depth_deadline(deadline)
            frontier, rest = run(tasks, until, depth)
            if rest and not any(c.screened for c in candidates):
                # nothing found yet to go deeper against: this depth goes on
                more, rest = run(rest, deadline, depth, _seen(candidates))
                frontier += more
            if stop.due(deadline):
                report.stopped = stop.reason or "budget"
                return candidates
            if rest:
                unfinished.append((depth, rest))
            if not frontier:
                break
        # what a depth left for the deeper ones: its complete µGraphs still
        # count; the prefixes they find have no depth left to extend them
        seen = _seen(candidates) if unfinished else None
        for depth, rest in unfinished:
            run(rest, deadline, depth, seen)
            if stop.due(deadline):
                report.stopped = stop.reason or "budget"
                return candidates
    finally:
        if pool is not None:
            pool.terminate()
    return candidates


def _generate(
    text: str,
    options: SearchOptions,
    deadline: float,
    stop: Stop,
    progress: Progress,
    report: Report,
    slack: float,
) -> list[Candidate]:
    """The candidates within ``deadline``. When a GPU decides (``slack`` > 1),
    the space the cost model's bound allows is searched first: it is far
    smaller than the space the slack allows (the 512-key decode attention's:
    177 thousand graphs against 17 million), so it usually completes in a
    fraction of the time, and the cost model's pick is always among the
    candidates timed; the wider space then gets the time left, and both
    passes' candidates are chosen from."""
    tight = _search(text, options, deadline, stop, progress, report)
    if slack <= 1.0 or report.stopped or stop.reason:
        return tight
    return tight + _search(text, options, deadline, stop, progress, report, slack)


def _seen(candidates: list[Candidate]) -> set[str]:
    """The µGraphs of ``candidates``, to tell those a task run again finds
    from new ones."""
    return {repr(c.graph) for c in candidates}


def _count(report: Report, stats: Stats) -> None:
    report.explored += stats.explored
    report.unexplored += stats.unexplored
    report.pruned += stats.pruned
    if stats.stopped and not report.stopped:
        report.stopped = "budget"


def superoptimize_function(
    function: func.FuncOp,
    options: SearchOptions = DEFAULT,
    measure: Measure | None = None,
    cache_dir: str | None = None,
    progress: Progress | None = None,
    served_by: float | None = None,
) -> Outcome:
    """Search for the best verified µGraph equivalent to a kernel-level function.

    ``served_by``: a segment's guaranteed share (``Shares``). A result its
    budget stopped, cached by a search guaranteed at least as much, answers
    this search: a run whose earlier segments come from the cache gives the
    later ones more time than the run that searched, and a rerun with the
    same budget serves the program it built before."""
    from mirage_xdsl.ir.printing import module_text

    start = time.monotonic()
    program = ModuleOp([function.clone()])
    text = module_text(program)
    name = function.sym_name.data
    input_graph = from_function(function)
    input_cost = cost_model.cost(input_graph)
    report = Report(
        name,
        input_cost=input_cost,
        kernels_before=input_graph.kernels,
        budget=options.budget,
    )
    directory = None if cache_dir == "none" else cache_dir or default_dir()
    cache = Cache(directory) if directory is not None else None
    measure_key = getattr(measure, "key", None) if measure is not None else ""
    key = search_key(text, options.key(), measure_key or "")
    cacheable = measure is None or measure_key is not None
    hit = cache.verified(key, text, options) if cache and cacheable else None
    if hit is not None and _answers(hit, options.budget, served_by):
        return _from_cache(hit, report, start)
    # a shorter search's pick competes as a baseline: searching again with
    # more time never ends on a program slower than the one it replaces
    previous = from_function(_cached_function(hit)) if hit is not None else None
    progress = progress or Progress()
    stop = Stop()
    with signals(stop):
        candidates = (
            _generate(
                text,
                options,
                start + options.budget * (1.0 - reserve(measure)),
                stop,
                progress,
                report,
                slack(measure),
            )
            if enumerable(input_graph)
            else []
        )
        report.phases["search"] = time.monotonic() - start
        progress.update("verifying" + (" and measuring" if measure else ""), True)
        best_cost, best = pick(
            program,
            input_graph,
            input_cost,
            candidates,
            options,
            measure,
            stop,
            report,
            start + options.budget,
            previous,
        )
        progress.close()
    report.best_cost = best_cost
    report.kernels_after = best.kernels
    report.seconds = time.monotonic() - start
    fn = _function_of(best)
    if cache and cacheable and report.stopped in ("", "budget"):
        program_text = module_text(ModuleOp([fn.clone()]))
        entry = {"program": program_text, "report": report.to_json()}
        if report.stopped:
            entry["budget"] = options.budget
            if served_by is not None:
                entry["guaranteed"] = served_by
        cache.put(key, entry)
    return Outcome(best, fn, report, candidates)


def enumerable(graph: UGraph) -> bool:
    """Whether the generator can build ``graph``: it enumerates no layout op,
    so a segment holding slices or concatenations along its rows
    (``partition.row_layouts``) has only its default builds (``fusion.py``)."""
    return not any(op.kind in t.LAYOUT_KINDS for op in graph.ops)


def _answers(entry: dict, budget: float, served_by: float | None = None) -> bool:
    """Whether a cached result answers a search with ``budget`` seconds: a
    complete search always does; one its budget stopped answers searches
    given no more time than it had, and a segment's search guaranteed no
    more than the share it was guaranteed (``served_by``: the same figure,
    from the same budget and weights), even where an earlier segment
    overran and left it less: a rerun serves what the first run built, and
    only a longer budget searches again (and replaces the entry). A search a
    signal or a lost worker stopped is never cached."""
    if "budget" not in entry or budget <= entry["budget"]:
        return True
    return served_by is not None and served_by <= entry.get("guaranteed", 0.0)


def _function_of(ug: UGraph) -> func.FuncOp:
    module = to_module(ug)
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    fn.detach()
    return fn


def _cached_function(entry: dict) -> func.FuncOp:
    from mirage_xdsl.ir.context import make_context
    from mirage_xdsl.ir.diagnostics import parse

    module = parse(make_context(), entry["program"], "<cache>")
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    fn.detach()
    return fn


def _from_cache(entry: dict, report: Report, start: float) -> Outcome:
    fn = _cached_function(entry)
    # An entry written by another version may carry fields this one dropped.
    known = {f.name for f in fields(Report)}
    saved = Report(**{k: v for k, v in entry["report"].items() if k in known})
    saved.cached = True
    saved.seconds = time.monotonic() - start
    return Outcome(None, fn, saved)
