"""The kernel-level generator: µGraphs as sequences of kernels.

A candidate is built kernel by kernel. Each step appends a library op
(``kernel.matmul``, ``kernel.exp``, ...) or a ``kernel.customized`` whose
block graph :mod:`block_search` finds for one :class:`Layout`. Steps are kept
in the canonical order of :mod:`canonical`, every new tensor's abstract
expression must be a subexpression of the target's, and a step that only
recomputes a tensor the prefix already has is dropped.

The search is structural, so it runs on a *miniature* of the program
(``miniature.py``: long axes shortened); complete plans are instantiated at
the real shapes afterwards (``instantiate.py``) and checked there.

The search deepens one kernel at a time (``max_kernels``). A prefix is only
extended if it leaves something to do: the last kernel must consume every
intermediate still unused and produce every output. With ``chain='partial'``
(the default) a customized kernel feeds a later one only through partial
sums written side by side (split-K, FlashDecoding): fusing is what
customized kernels are for, and a boundary pays only where blocks must
combine their results.

Work is cut into tasks (``task.py``) that worker processes run
independently.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
from xdsl.dialects import func

from mirage_xdsl.search import canonical
from mirage_xdsl.search import labels as L
from mirage_xdsl.search import rules as R
from mirage_xdsl.search.adapters import Pruner
from mirage_xdsl.search.block_layout import Layout
from mirage_xdsl.search.block_search import BlockSearch, Saved
from mirage_xdsl.search.fingerprint import evaluate, fingerprint, same, valid
from mirage_xdsl.search.fusion import row_local
from mirage_xdsl.search.instantiate import (
    Plan,
    fits_shared_memory,
    most_blocks,
    size_choices,
)
from mirage_xdsl.search.miniature import miniature, run_library
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.rules import Tensor
from mirage_xdsl.search.task import Prefix, Step, Task, TaskResult, step_key
from mirage_xdsl.search.ugraph import (
    KernelOp,
    UGraph,
    from_function,
    result_shape,
)

GRAPHS_PER_OUTPUT_SET = 24
GRAPHS_PER_PARTIAL_SET = 4
"""Block graphs kept for an output set of partial sums: each is a prefix
that the next depth costs at full shapes before extending it, and they all
write the same tensors, so the next kernels are searched once for all of
them; a few alternatives keep the cheapest likely among them."""


def block_op_bound(program: UGraph, max_ops: int) -> int:
    """Most ops in one block graph: ``max_ops``, or, for a longer program
    that is not row-local (a chain ``partition.py`` could not cut, such as
    attention with a mask: ten ops), its own op count and one more, so that
    it can still become one kernel: its online softmax folds the row sum into
    an accumulation and accumulates the numerator beside it. A row-local
    program has its fused build without a block search (``fusion.py``)."""
    n = len(program.ops)
    return max_ops if n <= max_ops or row_local(program) else n + 1


@dataclass
class State:
    """Kernel tensors of a prefix: records, fingerprint values, who made them."""

    tensors: list[Tensor]
    values: list[np.ndarray]


class Generator:
    """The search over one function; built once per process."""

    def __init__(self, function: func.FuncOp, options: SearchOptions):
        self.options = options
        self.program = from_function(function)
        self.max_ops = block_op_bound(self.program, options.max_ops)
        self.full_axes = L.analyse(function)
        self.mini = miniature(function, self.full_axes)
        self.axes = L.analyse(self.mini)
        ret = self.mini.body.block.last_op
        assert ret is not None
        outputs = list(ret.operands)
        self.pruner = Pruner(self.mini, outputs, enabled=options.prune)
        rng = np.random.default_rng(options.seed + 1)
        args = self.mini.body.block.args
        values = [rng.uniform(-1.0, 1.0, _shape(a)) for a in args]
        self.args = [
            Tensor(_shape(a), self.axes.labels[a], self.pruner.arg_expr(a))
            for a in args
        ]
        self.targets = [
            Tensor(_shape(v), self.axes.labels[v], self.pruner.arg_expr(v))
            for v in outputs
        ]
        self.arg_names = frozenset(
            name for t in self.args if t.expr is not None for name in t.expr.variables()
        )
        self.target_values = run_library(self.program, values)
        self._states: dict[Prefix, State | None] = {
            Prefix(): State(list(self.args), values)
        }

    # -- prefixes ---------------------------------------------------------------

    def state(self, prefix: Prefix) -> State | None:
        """Kernel tensors of a prefix (replayed, memoised)."""
        if prefix in self._states:
            return self._states[prefix]
        before = self.state(Prefix(prefix.steps[:-1], prefix.operands[:-1]))
        out = None
        if before is not None:
            step, operands = prefix.steps[-1], prefix.operands[-1]
            made = self._apply(before, step, operands)
            if made is not None:
                pos = len(prefix.steps) - 1
                out = State(
                    before.tensors + [replace(t, producer=pos) for t, _ in made],
                    before.values + [v for _, v in made],
                )
        self._states[prefix] = out
        return out

    def signature(self, prefix: Prefix) -> tuple | None:
        """What an extension of ``prefix`` can see: its kernel tensors (shape,
        labels, abstract expression, partial sums, fingerprint) and which of
        them later kernels already read. Prefixes that differ only in how their
        block graphs compute the same tensors share it, and the generator
        extends one of them for all (a plan found for one is a plan for each).
        """
        state = self.state(prefix)
        if state is None:
            return None
        first = len(self.args)
        used = frozenset(v for ops in prefix.operands for v in ops if v >= first)
        made = tuple(
            (t.shape, t.labels, t.expr, t.phase, t.partial, fingerprint(v))
            for t, v in zip(state.tensors[first:], state.values[first:], strict=True)
        )
        return made, used

    def _apply(self, state: State, step: Step, operands: tuple[int, ...]):
        if isinstance(step, KernelOp):
            made = self._library(state, step.kind, operands, dict(step.attrs))
            return [made] if made else None
        search = self._block_search(state, step.layout)
        return search.replay(step) if search else None

    def _library(
        self, state: State, kind: str, operands: tuple[int, ...], attrs: dict
    ) -> tuple[Tensor, np.ndarray] | None:
        ts = [state.tensors[v] for v in operands]
        if any(t.partial for t in ts):
            return None
        scope = R.Scope(reduced=self.axes.reduced, maxed=self.axes.maxed)
        got = R.apply(scope, kind, ts, attrs)
        if got is None:
            return None
        try:
            shape = result_shape(kind, [t.shape for t in ts], tuple(attrs.items()))
        except ValueError:
            return None
        expr = self.pruner.op_expr(
            kind, [t.expr for t in ts], [t.shape for t in ts], attrs
        )
        if not self.pruner.keep(expr):
            return None
        value = evaluate(
            kind, [state.values[v] for v in operands], dict(attrs, rank=len(shape))
        )
        if not valid(value):
            return None
        return Tensor(shape, got[0], expr), value

    def _block_search(
        self, state: State, layout: Layout, deadline: float = float("inf")
    ) -> BlockSearch | None:
        sources = [state.tensors[v] for v in layout.sources]
        choices = size_choices(layout, sources, self.axes.sizes, SearchOptions())
        if not choices:
            return None
        full = frozenset(
            t for t in self.axes.sizes if t not in layout.grid and t != layout.loop
        )
        return BlockSearch(
            self.pruner,
            layout,
            sources,
            [state.values[v] for v in layout.sources],
            choices[0],
            full,
            self.max_ops,
            self.axes.reduced,
            deadline,
            self.axes.constants,
            self.axes.maxed,
        )

    # -- what can come next ---------------------------------------------------

    def items(self, prefix: Prefix, final: bool = False) -> list[Layout | KernelOp]:
        """Layouts and library ops that may extend a prefix, each reading every
        tensor the prefix left unused (deterministic). A kernel must see every
        argument the outputs still missing depend on, unless it is not the
        last and may feed a later kernel (:meth:`_may_feed`); a layout must
        fit its sources in shared memory (``instantiate.fits_shared_memory``).
        Library ops come first, then layouts that can complete the outputs,
        of fewer sources, of more blocks (``instantiate.most_blocks``): the
        cheap one-kernel forms are found early, the cost bound then skips the
        few-block layouts (the slowest to search), and the split forms'
        prefixes lead the next depth."""
        state = self.state(prefix)
        if state is None:
            return []
        dangling = self._dangling(prefix, state)
        needed = self._needed(state)
        sizes, dtype = self.full_axes.sizes, self.program.dtype

        def wanted(item: Layout | KernelOp) -> bool:
            return dangling <= set(_sources(item)) and (
                self._sees(state, _sources(item), needed)
                or (not final and self._may_feed(state, item))
            )

        library = [op for op in self._library_items(state) if wanted(op)]
        layouts = [
            lay
            for lay in self._layouts(state, dangling)
            if wanted(lay) and fits_shared_memory(lay, state.tensors, sizes, dtype)
        ]
        return library + sorted(
            layouts,
            key=lambda lay: (
                not self._sees(state, lay.sources, needed),
                len(lay.sources),
                -most_blocks(lay, sizes),
            ),
        )

    def _may_feed(self, state: State, item: Layout | KernelOp) -> bool:
        """Whether ``item``'s outputs may be read by a later kernel: always,
        for a library op or with ``chain='all'``; with ``chain='partial'``,
        only a layout whose outputs can be partial: its grid splits an axis
        the program sums or takes a maximum over, or it reads partial sums.
        A kernel that can neither feed another nor complete the outputs (a
        block per head reading the queries and keys but not the values) is
        not searched."""
        if isinstance(item, KernelOp) or self.options.chain == "all":
            return True
        combined = self.axes.reduced | self.axes.maxed
        return any(t in combined for t in item.grid) or any(
            state.tensors[v].partial for v in item.sources
        )

    def _missing(self, state: State) -> list[int]:
        """The targets no kernel tensor of the prefix matches yet."""
        return [
            j
            for j in range(len(self.targets))
            if not any(
                self._matches(state.tensors[v], state.values[v], j)
                for v in range(len(self.args), len(state.tensors))
            )
        ]

    def _needed(self, state: State) -> frozenset[str]:
        """The arguments the missing targets depend on, by their abstract
        expressions (empty when an expression is unknown)."""
        if any(t.expr is None for t in self.targets):
            return frozenset()
        needed: frozenset[str] = frozenset()
        for j in self._missing(state):
            needed |= self.targets[j].expr.variables() & self.arg_names
        return needed

    def _sees(self, state: State, sources: Sequence[int], needed: frozenset) -> bool:
        """Whether a kernel reading ``sources`` can depend on every needed
        argument: a tensor depends on no argument its expression lacks."""
        if not needed:
            return True
        seen: set[str] = set()
        for v in sources:
            expr = state.tensors[v].expr
            if expr is None:
                return True
            seen |= expr.variables()
        return needed <= seen

    def _dangling(self, prefix: Prefix, state: State) -> set[int]:
        used = {v for ops in prefix.operands for v in ops}
        return {v for v in range(len(self.args), len(state.tensors)) if v not in used}

    def _library_items(self, state: State) -> Iterator[KernelOp]:
        n = len(state.tensors)
        for i in range(n):
            for kind, attrs in R.unary_specs(self.axes.constants):
                yield KernelOp(kind, (i,), attrs)
            for d in range(len(state.tensors[i].shape)):
                yield KernelOp("reduce_sum", (i,), (("dim", d),))
                yield KernelOp("reduce_max", (i,), (("dim", d),))
            for j in range(n):
                if i < j:
                    yield KernelOp("add", (i, j))
                if i <= j:
                    yield KernelOp("mul", (i, j))
                if i != j:
                    yield KernelOp("div", (i, j))
                yield KernelOp("matmul", (i, j))

    def _layouts(self, state: State, dangling: set[int]) -> Iterator[Layout]:
        """Every layout over sources that include all of ``dangling`` (the
        tensors no kernel reads yet), in a fixed order."""
        n = len(state.tensors)
        for k in range(max(1, len(dangling)), min(self.options.max_inputs, n) + 1):
            for sources in itertools.combinations(range(n), k):
                if not dangling.issubset(sources):
                    continue
                srcs = [state.tensors[v] for v in sources]
                tokens: set[L.Label] = set()
                for s in srcs:
                    tokens |= L.tokens_of(s.labels)
                parts = sorted(t for t in tokens if L.is_part(t))
                axes = sorted(t for t in tokens if L.is_axis(t))
                if any(s.partial for s in srcs):
                    loops: list[L.Label | None] = list(parts)
                else:
                    loops = [None, *sorted(t for t in axes if t in self.axes.reduced)]
                for r in range(min(3, len(axes)) + 1):
                    for grid in itertools.combinations(axes, r):
                        for loop in loops:
                            yield Layout(sources, grid, loop)
                            if _walks_split(srcs, grid, loop):
                                yield Layout(sources, grid, loop, walk_split=True)

    # -- running one task -----------------------------------------------------

    def run(self, task: Task, deadline: float) -> TaskResult:
        result = TaskResult()
        state = self.state(task.prefix)
        if state is None:
            return result
        keys = [
            step_key(s, o)
            for s, o in zip(task.prefix.steps, task.prefix.operands, strict=True)
        ]
        item = task.item
        if isinstance(item, KernelOp):
            result.stats.explored += 1
            made = self._library(state, item.kind, item.operands, dict(item.attrs))
            if made is None:
                result.stats.pruned += 1
                return result
            if self._fresh(state, made[1]):
                self._extend(task, state, keys, item, item.operands, [made], result)
            return result
        search = self._block_search(state, item, deadline)
        if search is None:
            return result
        search.saturate()
        saved = [s for s in search.saved() if self._fresh(state, s.value)]
        for outputs in self._output_sets(task, state, saved):
            if search.spent:
                break
            partial = any(s.tensor.partial for s in outputs)
            limit = GRAPHS_PER_PARTIAL_SET if partial else GRAPHS_PER_OUTPUT_SET
            for graph in search.graphs(outputs, limit):
                made = [(s.tensor, s.value) for s in outputs]
                self._extend(task, state, keys, graph, item.sources, made, result)
        result.stats.add(search.stats)
        return result

    def _fresh(self, state: State, value: np.ndarray) -> bool:
        """A kernel output that the prefix already has is wasted work."""
        fp = fingerprint(value)
        return all(v.shape != value.shape or fingerprint(v) != fp for v in state.values)

    def _output_sets(
        self, task: Task, state: State, saved: list[Saved]
    ) -> Iterator[tuple[Saved, ...]]:
        """Which classes a customized kernel should write out."""
        missing = self._missing(state)
        per_target = [
            [s for s in saved if self._matches(s.tensor, s.value, j)] for j in missing
        ]
        if missing and all(per_target):
            for combo in itertools.product(*per_target):
                yield tuple({s.cls: s for s in combo}.values())
        if task.final:
            return
        chainable = [
            s for s in saved if self.options.chain == "all" or s.tensor.partial
        ]
        plain = [s for s in chainable if not _shifts(s.tensor)]
        for k in (1, 2):
            yield from itertools.combinations(plain, k)
        yield from _with_maxima(chainable)

    def _matches(self, tensor: Tensor, value: np.ndarray, j: int) -> bool:
        target = self.targets[j]
        return (
            not tensor.partial
            and tensor.shape == target.shape
            and tensor.labels == target.labels
            and same(value, self.target_values[j])
        )

    def _extend(self, task, state, keys, step, operands, made, result) -> None:
        key = step_key(step, operands)
        if key in keys:
            return
        producer = max((state.tensors[v].producer for v in operands), default=-1)
        if not canonical.in_order(keys, producer, key):
            return
        pos = len(task.prefix.steps)
        tensors = state.tensors + [replace(t, producer=pos) for t, _ in made]
        values = state.values + [v for _, v in made]
        plan = self._complete(task.prefix, step, operands, tensors, values)
        if plan is not None:
            result.plans.append(plan)
        elif not task.final and self._may_chain(step, [t for t, _ in made]):
            steps = (*task.prefix.steps, step)
            result.prefixes.append(Prefix(steps, (*task.prefix.operands, operands)))

    def _may_chain(self, step: Step, made: list[Tensor]) -> bool:
        if isinstance(step, KernelOp) or self.options.chain == "all":
            return True
        return all(t.partial for t in made)

    def _complete(
        self,
        prefix: Prefix,
        step: Step,
        operands: tuple[int, ...],
        tensors: list[Tensor],
        values: list[np.ndarray],
    ) -> Plan | None:
        """The plan if these tensors compute every target and waste none."""
        used = {v for ops in (*prefix.operands, operands) for v in ops}
        first = len(self.args)
        outputs = []
        for j in range(len(self.targets)):
            hits = [
                v
                for v in range(first, len(tensors))
                if self._matches(tensors[v], values[v], j)
            ]
            if not hits:
                return None
            outputs.append(hits[-1])
        if any(v not in used and v not in outputs for v in range(first, len(tensors))):
            return None
        return Plan(
            (*prefix.steps, step),
            (*prefix.operands, operands),
            tuple(outputs),
            tuple(t.labels for t in tensors),
        )


def _walks_split(
    srcs: Sequence[Tensor], grid: tuple[L.Label, ...], loop: L.Label | None
) -> bool:
    """Whether a loop over split parts has a non-partial source that could
    walk the split axis alongside (``Layout.walk_split``); the grid must not
    split that axis already."""
    if loop is None or not L.is_part(loop) or loop[1] in grid:
        return False
    return any(not s.partial and loop[1] in s.labels for s in srcs)


def _shifts(t: Tensor) -> frozenset[L.Label]:
    """The part maxima a kernel tensor is relative to (``labels.shift``)."""
    return frozenset(tok for tok in t.partial if L.is_shift(tok))


def _with_maxima(chainable: Sequence[Saved]) -> Iterator[tuple[Saved, ...]]:
    """Output sets of FlashDecoding with the online softmax: one part maximum
    and one or two sums relative to it, which a later kernel can only combine
    with the maximum beside them."""
    for m in chainable:
        if m.tensor.partial != _shifts(m.tensor) or len(m.tensor.partial) != 1:
            continue
        sums = [
            s for s in chainable if s is not m and s.tensor.partial > m.tensor.partial
        ]
        for k in (1, 2):
            for combo in itertools.combinations(sums, k):
                yield (m, *combo)


def _sources(item: Layout | KernelOp) -> tuple[int, ...]:
    return item.sources if isinstance(item, Layout) else item.operands


def _shape(value) -> tuple[int, ...]:
    return tuple(value.type.get_shape())


__all__ = ["Generator", "Prefix", "Sequence", "Task", "TaskResult"]
