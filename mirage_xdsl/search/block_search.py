"""Enumerating the block graphs of one ``kernel.customized`` op.

A layout (``block_layout.py``) fixes what the kernel reads and how it is
partitioned, and with it the imaps, fmaps and the tiles the blocks read.

Within a layout the generator works bottom-up, one round per op depth:

1. every op that can take a tensor made in the previous round as an operand
   is checked once: labels, phases and linearity (``rules.py``), shapes, and
   the abstract-expression test (its expression must be a subexpression of
   the target's); a prefix that fails is never extended;
2. survivors are evaluated on the fixed random inputs (``fingerprint.py``);
   a tensor whose fingerprint is already known joins that *class* as one
   more way to compute it, so each distinct tensor is built (and extended)
   once instead of once per graph containing it;
3. a complete block graph is extracted for a choice of output classes by
   choosing one producer per class needed (every choice once; the graph's
   ops are then listed in one canonical topological order).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from mirage_xdsl.dialects import shapes
from mirage_xdsl.search import labels as L
from mirage_xdsl.search import rules as R
from mirage_xdsl.search.adapters import Pruner
from mirage_xdsl.search.block_layout import (
    BlockCandidate,
    Layout,
    Sizes,
    input_maps,
    input_tile,
    lift_source,
    output_map,
)
from mirage_xdsl.search.fingerprint import evaluate, fingerprint, valid
from mirage_xdsl.search.rules import Tensor
from mirage_xdsl.search.stats import Stats
from mirage_xdsl.search.ugraph import Op, result_shape
from mirage_xdsl.semantics.interpreter import ITERATION_AXIS, split_tiles, stitch_tiles

MAX_CLASSES = 4000
"""Saturation stops growing a layout past this many tensor classes."""

MAX_LAYOUT_SECONDS = float("inf")
"""Seconds one layout's saturation may run before it stops as if out of
budget. Unlimited in a search; the pruning comparison of
``tools/bench_search.py`` limits it so that an unpruned search, whose first
layout alone would take the whole budget, reaches every layout and counts
what each holds (``Stats.unexplored``)."""

MAX_GRAPH_STEPS = 50_000
"""Producer choices tried per output set. Classes with several producers
multiply the choices; when this many have not yielded the graphs wanted, the
rest are further spellings of the same classes (seen at full LoRA shapes,
where one task otherwise ran for many minutes)."""

MAX_TASK_GRAPH_STEPS = 1_000_000
"""Producer choices tried per block search, over all its output sets. A task
that may feed a second kernel also tries every pair of partial results as
outputs (thousands of sets at full LoRA shapes, one task ran 500 s); the
output sets that complete the program come first, so this bound only cuts
chains, the pairs tried last."""


_UNTYPED = object()


@dataclass
class Class:
    """Tensors with one fingerprint: the ways found to compute them."""

    tensor: Tensor
    value: np.ndarray
    deriv: frozenset[int]
    """Classes in its first (smallest) derivation, itself included."""
    producers: list[Op] = field(default_factory=list)


@dataclass(frozen=True)
class Saved:
    """A class that can be a kernel output: its omap and the kernel tensor."""

    cls: int
    omap: tuple[int, int, int]
    tensor: Tensor
    value: np.ndarray


class BlockSearch:
    """Saturates one layout's classes, then extracts complete graphs."""

    def __init__(
        self,
        pruner: Pruner,
        layout: Layout,
        sources: Sequence[Tensor],
        values: Sequence[np.ndarray],
        sizes: Sizes,
        full: frozenset[L.Label],
        max_ops: int,
        reduced: frozenset[L.Label],
        deadline: float = float("inf"),
        constants: tuple = (),
        maxed: frozenset[L.Label] = frozenset(),
    ):
        self.pruner = pruner
        self.constants = constants
        self.layout = layout
        self.sizes = sizes
        self.scope = R.Scope(layout.grid, layout.loop, full, reduced, maxed)
        loop = layout.loop
        self.shifts = loop is not None and (
            loop in maxed or (L.is_part(loop) and loop[1] in maxed)
        )
        """Whether the loop may carry part maxima, so that accumulations
        weighted by one are worth trying."""
        self.max_ops = max_ops
        self.deadline = min(deadline, time.monotonic() + MAX_LAYOUT_SECONDS)
        self.stats = Stats()
        self.graph_steps = 0
        """Producer choices tried so far, over every call of :meth:`graphs`."""
        rank = max(len(src.shape) for src in sources)
        lifted = [lift_source(src, rank) for src in sources]
        self.maps = tuple(
            m if len(src.shape) == rank else replace(m, rank=rank)
            for m, src in zip(input_maps(layout, lifted), sources, strict=True)
        )
        sources = lifted
        values = [v.reshape(src.shape) for v, src in zip(values, sources, strict=True)]
        self.classes: list[Class] = []
        self._by_fp: dict[bytes, int] = {}
        self._kinds: list[int] = []
        self._kind_ids: dict[tuple, int] = {}
        self._typed: dict[tuple, tuple | None] = {}
        self.ok = True
        for m, src, value in zip(self.maps, sources, values, strict=True):
            tile = input_tile(m, src, sizes, layout.loop)
            if tile is None:
                self.ok = False
                return
            v = split_tiles(value, m.imap, m.fmap, sizes.grid, sizes.forloop)
            self.classes.append(Class(tile, v, frozenset()))
            self._by_fp[self._key(tile, v)] = len(self.classes) - 1

    @property
    def n_inputs(self) -> int:
        return len(self.maps)

    def _key(self, t: Tensor, value: np.ndarray) -> bytes:
        meta = repr((t.labels, t.phase, sorted(t.partial))).encode()
        return fingerprint(value) + meta

    # -- one op ------------------------------------------------------------------

    def make(
        self, kind: str, operands: tuple[int, ...], attrs: dict
    ) -> tuple[Tensor, np.ndarray] | None:
        """Check and evaluate one op on classes; None if it is pruned."""
        cs = [self.classes[v] for v in operands]
        ts = [c.tensor for c in cs]
        key = (kind, tuple(attrs.items()), *map(self._kind_of, operands))
        typed = self._typed.get(key, _UNTYPED)
        if typed is _UNTYPED:
            typed = self._typed[key] = self._type(kind, ts, attrs)
        if typed is None:
            return None
        labels, partial, phase, shape = typed
        expr_attrs = attrs
        if kind == "forloop_accum":
            expr_attrs = dict(attrs, forloop=self.sizes.forloop)
        expr = self.pruner.op_expr(
            kind, [t.expr for t in ts], [t.shape for t in ts], expr_attrs
        )
        if not self.pruner.keep(expr):
            self.stats.pruned += 1
            return None
        eval_attrs = dict(attrs, rank=len(ts[0].shape))
        value = evaluate(kind, [c.value for c in cs], eval_attrs, self.sizes.forloop)
        if not valid(value):
            return None
        return Tensor(shape, labels, expr, phase, partial), value

    def _type(self, kind: str, ts: list[Tensor], attrs: dict) -> tuple | None:
        """Labels, partial sums, phase and shape of an op's result (None if
        the rules or the shapes refuse it)."""
        got = R.apply(self.scope, kind, ts, attrs)
        if got is None:
            return None
        try:
            shape = result_shape(kind, [t.shape for t in ts], tuple(attrs.items()))
        except shapes.ShapeError:
            return None
        return (*got, shape)

    def _kind_of(self, v: int) -> int:
        """An id shared by the classes alike in all that :meth:`_type` reads
        (shape, labels, phase, partial sums): classes far outnumber these
        kinds, so each op is typed once per kind of operands, not per class."""
        kinds = self._kinds
        while len(kinds) <= v:
            t = self.classes[len(kinds)].tensor
            sig = (t.shape, t.labels, t.phase, t.partial)
            kinds.append(self._kind_ids.setdefault(sig, len(self._kind_ids)))
        return kinds[v]

    def _specs(self, new: set[int], count: int) -> Iterator[tuple[str, tuple, dict]]:
        """Ops with at least one operand in ``new``, each once.

        Operand pairs are filtered on labels and phases first, once per pair
        rather than once per op kind: most pairs of tensors cannot meet.
        """
        tensors = [c.tensor for c in self.classes]
        for n in sorted(new):
            yield from self._own_specs(n, tensors[n])
            for j in range(count):
                if j == n or (j in new and j > n):
                    continue
                yield from self._pair_specs(j, tensors[j], n, tensors[n])

    def _own_specs(self, n: int, tn: Tensor) -> Iterator[tuple[str, tuple, dict]]:
        """The ops of one operand, or of one class taken twice."""
        for kind, attrs in R.unary_specs(self.constants):
            yield kind, (n,), dict(attrs)
        for d in range(len(tn.shape)):
            yield "reduce_sum", (n,), {"dim": d}
            yield "reduce_max", (n,), {"dim": d}
        if self.layout.loop is not None:
            for r in R.ACCUM_REDUCTIONS:
                yield "forloop_accum", (n,), {"reduction": r}
        yield "mul", (n, n), {}
        yield "matmul", (n, n), {}

    def _pair_specs(
        self, j: int, tj: Tensor, n: int, tn: Tensor
    ) -> Iterator[tuple[str, tuple, dict]]:
        """The ops of two distinct classes; only their labels and phases
        decide which (so :meth:`count_specs` can count them by signature)."""
        if {tj.phase, tn.phase} == {R.LOOP, R.POST}:
            return
        if len(tj.labels) != len(tn.labels):
            return
        if L.broadcast(tj.labels, tn.labels) is not None:
            a, b = min(j, n), max(j, n)
            yield "add", (a, b), {}
            yield "mul", (a, b), {}
            yield "div", (j, n), {}
            yield "div", (n, j), {}
        for x, tx, y, ty in ((j, tj, n, tn), (n, tn, j, tj)):
            if L.matmul(tx.labels, ty.labels) is not None:
                yield "matmul", (x, y), {}
        differ = [
            d
            for d, (p, q) in enumerate(zip(tj.labels, tn.labels, strict=True))
            if p != q
        ]
        if (
            len(differ) == 1
            and {tj.labels[differ[0]], tn.labels[differ[0]]} <= self.scope.reduced
        ):
            yield "concat", (j, n), {"dim": differ[0]}
            yield "concat", (n, j), {"dim": differ[0]}
        if self.shifts and tj.phase == tn.phase == R.LOOP:
            for x, tx, m, tm in ((j, tj, n, tn), (n, tn, j, tj)):
                if tm.labels == (*tx.labels[:-1], L.UNIT):
                    for r in R.SHIFTABLE:
                        yield "forloop_accum", (x, m), {"reduction": r}

    def count_specs(self, new: set[int], count: int) -> int:
        """How many ops :meth:`_specs` yields, without yielding them.

        Which ops a pair of classes gets depends only on their labels, phases
        and rank, so classes are grouped by that signature and each pair of
        groups is asked once. A round of an unpruned search can hold more
        than 10^10 ops; this is how a search stopped early still states
        exactly how many its round in progress would have tried."""
        signature = [
            (c.tensor.labels, c.tensor.phase, len(c.tensor.shape))
            for c in self.classes[:count]
        ]
        every: dict[tuple, list[int]] = {}
        for i, sig in enumerate(signature):
            every.setdefault(sig, []).append(i)
        fresh: dict[tuple, list[int]] = {}
        for i in sorted(new):
            fresh.setdefault(signature[i], []).append(i)
        rep = {sig: self.classes[ids[0]].tensor for sig, ids in every.items()}
        total = 0
        for sig_n, ns in fresh.items():
            total += len(ns) * sum(1 for _ in self._own_specs(0, rep[sig_n]))
            for sig_j, js in every.items():
                ops = sum(1 for _ in self._pair_specs(0, rep[sig_j], 1, rep[sig_n]))
                if ops:
                    same = sig_j == sig_n
                    total += ops * _pairs(ns, js, fresh.get(sig_j, []), same)
        return total

    def _small_enough(self, operands: tuple[int, ...]) -> bool:
        """A cheap necessary condition for the derivation to fit max_ops."""
        classes = self.classes
        limit = self.max_ops
        return all(len(classes[v].deriv) < limit for v in operands)

    def saturate(self) -> None:
        if not self.ok:
            return
        new = set(range(len(self.classes)))
        for _ in range(self.max_ops):
            count = len(self.classes)
            created: set[int] = set()
            before = self.stats.explored
            for kind, operands, attrs in self._specs(new, count):
                self.stats.explored += 1
                if self.stats.explored % 512 == 0 and time.monotonic() > self.deadline:
                    self.stats.stopped = True
                    self._cut_short(new, count, self.stats.explored - before)
                    return
                if not self._small_enough(operands):
                    continue
                made = self.make(kind, operands, attrs)
                if made is None:
                    continue
                tensor, value = made
                below = frozenset().union(*(self.classes[v].deriv for v in operands))
                if len(below) + 1 > self.max_ops:
                    continue
                op = Op(kind, operands, tuple(sorted(attrs.items())))
                key = self._key(tensor, value)
                hit = self._by_fp.get(key)
                if hit is not None:
                    if hit not in below and op not in self.classes[hit].producers:
                        self.classes[hit].producers.append(op)
                    continue
                cid = len(self.classes)
                if cid >= MAX_CLASSES:
                    self.stats.capped = True
                    self._cut_short(new, count, self.stats.explored - before)
                    return
                self.classes.append(Class(tensor, value, below | {cid}, [op]))
                self._by_fp[key] = cid
                created.add(cid)
            self.stats.classes += len(created)
            if not created:
                return
            new = created

    def _cut_short(self, new: set[int], count: int, tried: int) -> None:
        """Count the ops of the round in progress that were never tried."""
        self.stats.unexplored += self.count_specs(new, count) - tried

    # -- outputs and graphs ----------------------------------------------------

    def saved(self) -> list[Saved]:
        """Every class that can be written out as a kernel output."""
        out = []
        for cid in range(self.n_inputs, len(self.classes)):
            c = self.classes[cid]
            got = output_map(self.layout, c.tensor)
            if got is None:
                continue
            omap, record = got
            try:
                shape = shapes.stitched_shape(c.tensor.shape, omap, self.sizes.grid)
            except shapes.ShapeError:
                continue
            value = c.value
            if value.shape[ITERATION_AXIS] != 1:
                continue
            full = stitch_tiles(value, omap, self.sizes.grid)
            tensor = Tensor(
                shape, record.labels, record.expr, R.INVARIANT, record.partial
            )
            out.append(Saved(cid, omap, tensor, full))
        return out

    @property
    def spent(self) -> bool:
        """No more graphs from this search: out of budget, or out of choices."""
        return self.stats.stopped or self.graph_steps > MAX_TASK_GRAPH_STEPS

    def graphs(self, outputs: Sequence[Saved], limit: int) -> list[BlockCandidate]:
        """Block graphs computing ``outputs``: each producer choice once."""
        found: list[BlockCandidate] = []
        k = self.n_inputs
        steps, late = 0, False

        def rec(needed: tuple[int, ...], chosen: dict[int, Op]) -> None:
            nonlocal steps, late
            if len(found) >= limit or late:
                return
            steps += 1
            self.graph_steps += 1
            # producer choices multiply: the budget must hold here too
            if steps % 512 == 0 and time.monotonic() > self.deadline:
                self.stats.stopped = late = True
                return
            if steps > MAX_GRAPH_STEPS or self.spent:
                self.stats.capped = late = True
                return
            pending = [c for c in needed if c >= k and c not in chosen]
            if len(chosen) + len(pending) > self.max_ops:
                return
            if not pending:
                graph = self._graph(outputs, chosen)
                if graph is not None:
                    found.append(graph)
                return
            c = max(pending)
            for op in self.classes[c].producers:
                chosen[c] = op
                extra = tuple(v for v in op.operands if v not in needed)
                rec(needed + extra, chosen)
                del chosen[c]

        rec(tuple(dict.fromkeys(s.cls for s in outputs)), {})
        return found

    def _graph(
        self, outputs: Sequence[Saved], chosen: dict[int, Op]
    ) -> BlockCandidate | None:
        """The chosen producers as a block graph in canonical order."""
        order: list[int] = []
        state: dict[int, int] = {}

        def visit(c: int) -> bool:
            if c < self.n_inputs or state.get(c) == 2:
                return True
            if state.get(c) == 1:
                return False  # a cycle through alternative producers
            state[c] = 1
            if not all(visit(v) for v in chosen[c].operands):
                return False
            state[c] = 2
            order.append(c)
            return True

        if not all(visit(s.cls) for s in outputs):
            return None
        used_inputs = {
            v for c in order for v in chosen[c].operands if v < self.n_inputs
        }
        if len(used_inputs) != self.n_inputs:
            return None
        index = {c: c for c in range(self.n_inputs)}
        for pos, c in enumerate(order):
            index[c] = self.n_inputs + pos
        ops = tuple(
            Op(
                chosen[c].kind,
                tuple(index[v] for v in chosen[c].operands),
                chosen[c].attrs,
            )
            for c in order
        )
        outs = tuple((index[s.cls], s.omap) for s in outputs)
        return BlockCandidate(self.layout, self.maps, ops, outs)

    def replay(self, graph: BlockCandidate) -> list[tuple[Tensor, np.ndarray]] | None:
        """Records and values of a known graph's outputs (no saturation)."""
        if not self.ok:
            return None
        ids = list(range(self.n_inputs))
        for op in graph.ops:
            made = self.make(
                op.kind, tuple(ids[v] for v in op.operands), dict(op.attrs)
            )
            if made is None:
                return None
            tensor, value = made
            self.classes.append(Class(tensor, value, frozenset(), [op]))
            ids.append(len(self.classes) - 1)
        out = []
        for v, omap in graph.outputs:
            c = self.classes[ids[v]]
            got = output_map(self.layout, c.tensor)
            if got is None or got[0] != omap:
                return None
            shape = shapes.stitched_shape(c.tensor.shape, omap, self.sizes.grid)
            record = got[1]
            out.append(
                (
                    Tensor(
                        shape, record.labels, record.expr, R.INVARIANT, record.partial
                    ),
                    stitch_tiles(c.value, omap, self.sizes.grid),
                )
            )
        return out


def _pairs(
    ns: Sequence[int], js: Sequence[int], fresh_js: Sequence[int], same: bool
) -> int:
    """Pairs (n, j) that :meth:`BlockSearch._specs` visits: n from ``ns``
    (new classes), j from ``js`` (all classes of one signature, of which
    ``fresh_js`` are new), j != n, and a new j only when j < n (so a pair of
    new classes is visited once). ``same``: ``ns`` is ``fresh_js``. All
    three are sorted."""
    pairs = len(ns) * len(js)
    if same:
        # drop j == n, and the later one of each pair of new classes
        k = len(ns)
        return pairs - k - k * (k - 1) // 2
    above = np.searchsorted(np.asarray(fresh_js), np.asarray(ns), side="right")
    return pairs - int(np.sum(len(fresh_js) - above))
