"""What a worker process does with a task: search it, instantiate, screen.

Each worker rebuilds the program from its text (:class:`Worker`), then runs
the tasks it is sent: the generator finds a task's complete plans and deeper
prefixes, each plan is instantiated at full shapes (concrete grids and loop
ranges, the µGraph optimizer, the cost model), and the cheapest
instantiation is screened on random float inputs. The result is a
:class:`TaskReport`.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func

from mirage_xdsl.search import cost_model
from mirage_xdsl.search.adapters import float_outputs
from mirage_xdsl.search.block_layout import Layout
from mirage_xdsl.search.bound import kernel_bound, prefix_cost, promising
from mirage_xdsl.search.generator import Generator
from mirage_xdsl.search.instantiate import instantiate
from mirage_xdsl.search.optimizer import optimize
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.pool import one_blas_thread
from mirage_xdsl.search.report import Candidate
from mirage_xdsl.search.rules import Tensor
from mirage_xdsl.search.screening import SCREEN_RANGE, screen
from mirage_xdsl.search.stats import Stats
from mirage_xdsl.search.task import Prefix, Task, rebased
from mirage_xdsl.search.ugraph import KernelOp, UGraph

Extension = tuple[Layout | KernelOp, float]
"""A way to extend a prefix by one kernel, and the least that kernel costs
(``bound.kernel_bound``)."""

Limit = Any
"""What a task's prefix plus one kernel must cost less than (the best
screened candidate times the slack), in ``value``: a shared
``multiprocessing.Value('d')`` in the forked pool, the value a task was sent
with on another executor (``dispatch.Bound``)."""

SIZES_PER_PLAN = 3
"""Instantiations kept per structural plan: the cheapest, and the next
cheapest of each other grid and for-loop size. The cost model is least sure
about how much parallelism pays (a split-K or FlashDecoding grid of 64
blocks against one of 512), so those variants are verified and, on a GPU,
timed rather than decided by the model alone."""


@dataclass(frozen=True)
class TaskReport:
    """What running one task gave."""

    found: list[Candidate] = field(default_factory=list)
    """Complete candidates, each plan's size variants (:func:`size_variants`)."""
    prefixes: list[Prefix] = field(default_factory=list)
    """Prefixes one kernel deeper, for the next depth."""
    stats: Stats = field(default_factory=Stats)
    skipped: bool = False
    """Not run: the limit had dropped below what its prefix can reach."""
    failures: list[str] = field(default_factory=list)
    """Why candidates failed to build or run when screened."""


class Worker:
    """Everything a process needs to run tasks, rebuilt from program text."""

    def __init__(self, text: str, options: SearchOptions, limit: Limit | None = None):
        from mirage_xdsl.ir.context import make_context
        from mirage_xdsl.ir.diagnostics import parse

        self.module = parse(make_context(), text, "<search>")
        self.function = next(
            op for op in self.module.ops if isinstance(op, func.FuncOp)
        )
        self.options = options
        self.limit = limit
        self.clock = 0.0
        """What to add to a deadline read on the sender's monotonic clock
        to read it on this process's (another machine's: ``dispatch.py``)."""
        self.generator = Generator(self.function, options)
        self.prefix_costs: dict[Prefix, float] = {}
        """The prefixes this worker has costed (:meth:`task_cost`)."""
        g = self.generator
        self.full_args = [
            Tensor(shape, labels, None)
            for shape, labels in zip(
                g.program.inputs,
                (g.full_axes.labels[a] for a in self.function.args),
                strict=True,
            )
        ]

    @functools.cached_property
    def screening(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The screening inputs and the program's outputs on them, computed
        on the first screen: at full shapes the reference takes seconds (20 s
        for attention over 2048 tokens), and the main process of a search
        run by a pool never screens."""
        from mirage_xdsl.semantics.inputs import random_inputs

        inputs = random_inputs(self.module, self.options.seed, *SCREEN_RANGE)
        return inputs, float_outputs(self.module, inputs)

    def finish(self, ug: UGraph) -> tuple[float, UGraph] | None:
        optimized = optimize(ug, self.options.blockdims)
        if optimized is None:
            return None
        return cost_model.cost(optimized), optimized

    def task_cost(self, task: Task) -> float:
        """:attr:`Task.cost`, costing the prefix and its alternates here when
        the task came without it (each prefix once per worker)."""
        if task.cost is not None:
            return task.cost
        for p in (task.prefix, *task.alternates):
            if p not in self.prefix_costs:
                self.prefix_costs[p] = self.prefix_cost(p)
        return min(self.prefix_costs[p] for p in (task.prefix, *task.alternates))

    def run(self, task: Task, deadline: float) -> TaskReport:
        if self.limit is not None and not promising(
            self.task_cost(task), self.limit.value, task.next_kernel
        ):
            return TaskReport(skipped=True)
        result = self.generator.run(task, deadline)
        plans, prefixes = rebased(task, result)
        g = self.generator
        found: list[Candidate] = []
        failures: list[str] = []
        for plan in plans:
            if time.monotonic() > deadline:
                result.stats.stopped = True
                break
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
                screened, failed = screen(best[0][1], *self.screening)
                failures += [failed] if failed else []
                found += [
                    Candidate(cost, ug, screened) for cost, ug in size_variants(best)
                ]
        return TaskReport(found, prefixes, result.stats, False, failures)

    def prefix_cost(self, prefix: Prefix) -> float:
        g = self.generator
        return prefix_cost(g, prefix, self.full_args, self.options, self.finish)

    def extensions(self, prefix: Prefix, final: bool) -> list[Extension]:
        """The layouts and library ops that may extend ``prefix`` (in the
        generator's order), each with the least its kernel costs."""
        g = self.generator
        return [(item, kernel_bound(g, item)) for item in g.items(prefix, final)]


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


# --- in a pool's worker process ----------------------------------------------

_WORKER: Worker | None = None


def init_worker(text: str, options: SearchOptions, limit: Limit | None) -> None:
    """A pool's initializer: this process's :class:`Worker`."""
    one_blas_thread()
    global _WORKER
    _WORKER = Worker(text, options, limit)


def run_chunk(
    chunk: list[tuple[Task, float]], worker: Worker | None = None
) -> list[TaskReport]:
    """Run each task by its deadline, on ``worker`` (default: this
    process's, :func:`init_worker`)."""
    w = worker or _WORKER
    assert w is not None
    return [w.run(task, deadline + w.clock) for task, deadline in chunk]


def signature_chunk(
    chunk: list[Prefix], worker: Worker | None = None
) -> list[tuple | None]:
    """Each prefix's :meth:`Generator.signature` (None: it does not replay)."""
    w = worker or _WORKER
    assert w is not None
    return [w.generator.signature(p) for p in chunk]


def extension_chunk(
    chunk: list[tuple[Prefix, bool]], worker: Worker | None = None
) -> list[list[Extension]]:
    """Each prefix's :meth:`Worker.extensions` (with whether its next kernel
    is the last)."""
    w = worker or _WORKER
    assert w is not None
    return [w.extensions(p, final) for p, final in chunk]
