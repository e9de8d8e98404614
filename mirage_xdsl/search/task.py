"""Search tasks: the structure a worker process is handed and what it returns.

Work is cut into :class:`Task` items (a prefix and one layout or library
op); worker processes run them independently. Tasks carry only structure: a
:class:`Prefix` lists the kernels chosen so far as :data:`Step` items, and a
worker replays it to recompute its tensors. A :class:`TaskResult` holds the
complete plans and the extended prefixes found; :func:`rebased` repeats them
for the task's alternate prefixes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from mirage_xdsl.search.block_layout import BlockCandidate, Layout
from mirage_xdsl.search.instantiate import Plan
from mirage_xdsl.search.stats import Stats
from mirage_xdsl.search.ugraph import KernelOp

Step = KernelOp | BlockCandidate


@dataclass(frozen=True)
class Prefix:
    """The kernels chosen so far, as structure only."""

    steps: tuple[Step, ...] = ()
    operands: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class Task:
    prefix: Prefix
    item: Layout | KernelOp
    final: bool
    alternates: tuple[Prefix, ...] = ()
    """Other prefixes with the prefix's :meth:`Generator.signature`: whatever
    extends the prefix extends them too, so the extension is searched once."""
    cost: float | None = 0.0
    """The least the kernels of the prefix (or of an alternate) cost at full
    shapes (``bound.py``): with one more kernel, what any completion costs
    at least. None: not costed yet; the worker running the task costs them
    first (:meth:`Worker.task_cost`)."""
    next_kernel: float | None = None
    """The least the item's own kernel costs (``bound.py``); None: any
    kernel's floor."""


@dataclass
class TaskResult:
    plans: list[Plan] = field(default_factory=list)
    prefixes: list[Prefix] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)


def step_key(step: Step, operands: tuple[int, ...]) -> tuple:
    if isinstance(step, KernelOp):
        return (operands, step.kind, step.attrs)
    return (operands, "customized", step.layout, step.ops, step.outputs)


def rebased(task: Task, result: TaskResult) -> tuple[list[Plan], list[Prefix]]:
    """The task's plans and prefixes, and the same with each alternate prefix in
    place of the task's own (they compute the same tensors)."""
    n = len(task.prefix.steps)
    plans, prefixes = list(result.plans), list(result.prefixes)
    for alt in task.alternates:
        plans += [
            replace(
                p, steps=alt.steps + p.steps[n:], operands=alt.operands + p.operands[n:]
            )
            for p in result.plans
        ]
        prefixes += [
            Prefix(alt.steps + p.steps[n:], alt.operands + p.operands[n:])
            for p in result.prefixes
        ]
    return plans, prefixes
