"""One level's graph under construction (:class:`Graph`): picking operands
that fit, and adding ops only where their values stay in range and their tiles
fit the shared-memory budget; :class:`Options`, what the caller restricts."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.ir import Attribute, Block, Operation, SSAValue

from mirage_xdsl.dialects import block, shapes
from mirage_xdsl.dialects.block_structure import Phase, tile_bytes
from mirage_xdsl.fuzz.values import (
    Val,
    broadcastable,
    in_range,
    joint_phase,
    phases_mix,
)
from mirage_xdsl.ops import OPS, Form

DIMS = (1, 2, 4, 8, 16, 32, 64, 3, 6, 12, 24, 48)
DIM_WEIGHTS = np.array([2, 3, 4, 4, 3, 2, 1, 1, 1, 1, 1, 1], dtype=float)

RMS_EPS = (0.0, 0.0, 1e-6, 1e-2)
"""Epsilons drawn for rms_norm (half the time none)."""


@dataclass
class Options:
    max_ops: int
    max_block_ops: int
    max_elements: int
    customized_prob: float
    thread_graph_prob: float
    dtypes: tuple[Attribute, ...]
    kinds: frozenset[str] | None = None
    reductions: tuple[str, ...] = block.ACCUM_REDUCTIONS

    def allowed(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds

    def menu(self, kinds: Sequence[str]) -> tuple[str, ...]:
        return tuple(k for k in kinds if self.allowed(k))


@dataclass
class Graph:
    """One level's graph under construction: a block of ops and a value pool.

    ``fresh(shape, phases)`` makes a new input value of ``shape`` in one of
    ``phases`` (a new function argument, or a new tile loader), or returns
    None where the level cannot make inputs (thread graphs).
    """

    rng: np.random.Generator
    opts: Options
    ops: dict[str, type[Operation]]
    block: Block
    fresh: Callable[[tuple[int, ...], tuple[Phase, ...]], Val | None]
    pool: list[Val] = field(default_factory=list)
    budget: int | None = None
    """Shared-memory bytes left for new values (block level), or None."""
    forloop_range: int = 1

    # --- choosing ------------------------------------------------------------

    def coin(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, items: Sequence):
        return items[int(self.rng.integers(len(items)))]

    def dim(self) -> int:
        return int(self.rng.choice(DIMS, p=DIM_WEIGHTS / DIM_WEIGHTS.sum()))

    def pick(self, ok: Callable[[Val], bool] = lambda v: True) -> Val | None:
        fits = [v for v in self.pool if v.size <= self.opts.max_elements and ok(v)]
        return self.choice(fits) if fits else None

    def partner(
        self, a: Val, shape_ok: Callable[[tuple[int, ...]], bool], want: tuple
    ) -> Val | None:
        """An operand to combine with ``a``: existing if any fits, else fresh."""
        existing = self.pick(
            lambda v: shape_ok(v.shape) and phases_mix(a.phase, v.phase)
        )
        if existing is not None and self.coin(0.6):
            return existing
        allowed = tuple(
            p for p in (Phase.INVARIANT, Phase.LOOP) if phases_mix(a.phase, p)
        )
        made = (
            self.fresh(want, allowed)
            if math.prod(want) <= self.opts.max_elements
            else None
        )
        return made or existing

    # --- emitting ------------------------------------------------------------

    def emit(self, op: Operation, lo: float, hi: float, phase: Phase) -> Val | None:
        """Append ``op`` if its values fit the ranges and the memory budget."""
        results = [SSAValue.get(r) for r in op.results]
        cost = sum(tile_bytes(r) for r in results)
        if not in_range(lo, hi) or (self.budget is not None and cost > self.budget):
            op.erase()
            return None
        if self.budget is not None:
            self.budget -= cost
        self.block.add_op(op)
        vals = [Val(r, lo, hi, phase) for r in results]
        self.pool.extend(vals)
        return vals[0] if vals else None

    def add_arith(self, kind: str) -> Val | None:
        """Try to add one arithmetic op of ``kind``; None if nothing fits."""
        cls = self.ops[kind]
        if kind == "rms_norm":
            a = self.pick()
            if a is None:
                return None
            eps = float(self.choice(RMS_EPS))
            lo = a.lo / math.sqrt(a.hi * a.hi + eps)  # eps only shrinks the result
            return self.emit(cls(a.value, eps), lo, a.hi / a.lo, a.phase)
        spec = OPS[kind]
        if spec.form is Form.SCALAR:
            a = self.pick()
            if a is None:
                return None
            c = float(self.choice(spec.constants))
            lo, hi = spec.interval(a.lo, a.hi, c)
            return self.emit(cls(a.value, c), lo, hi, a.phase)
        if spec.form is Form.UNARY:
            a = self.pick()
            if a is None:
                return None
            return self.emit(cls(a.value), *spec.interval(a.lo, a.hi), a.phase)
        if spec.form is Form.BINARY:
            return self.add_binary(cls, kind)
        if kind == "matmul":
            return self.add_matmul(cls)
        if kind == "reduce_sum":
            a = self.pick()
            if a is None:
                return None
            dim = int(self.rng.integers(len(a.shape)))
            n = a.shape[dim]
            return self.emit(cls(a.value, dim), a.lo * n, a.hi * n, a.phase)
        if kind == "reduce_max":
            a = self.pick()
            if a is None:
                return None
            dim = int(self.rng.integers(len(a.shape)))
            return self.emit(cls(a.value, dim), a.lo, a.hi, a.phase)
        if kind == "concat":
            return self.add_concat(cls)
        if kind == "slice":
            return self.add_slice(cls)
        if kind == "broadcast":
            return self.add_broadcast(cls)
        if kind == "cast":  # to its own type: the program stays one type
            a = self.pick()
            if a is None:
                return None
            return self.emit(
                cls(a.value, a.value.type.element_type), a.lo, a.hi, a.phase
            )
        if kind in ("transpose", "reshape"):
            return self.add_layout(cls, kind)
        if kind == "forloop_accum":
            return self.add_accum(None)
        raise ValueError(f"no generator for '{kind}'")

    def add_binary(self, cls: type[Operation], kind: str) -> Val | None:
        a = self.pick()
        if a is None:
            return None
        want = tuple(1 if self.coin(0.25) else d for d in a.shape)
        b = self.partner(a, lambda s: broadcastable(a.shape, s), want) or a
        if self.coin(0.5):
            a, b = b, a
        if math.prod(shapes.broadcast(a.shape, b.shape)) > self.opts.max_elements:
            return None
        lo, hi = OPS[kind].interval(a.lo, a.hi, b.lo, b.hi)
        return self.emit(cls(a.value, b.value), lo, hi, joint_phase(a.phase, b.phase))

    def add_matmul(self, cls: type[Operation]) -> Val | None:
        a = self.pick()
        if a is None:
            return None
        *batch, _, k = a.shape
        want = (*batch, k, self.dim())
        b = self.partner(
            a, lambda s: tuple(s[:-2]) == tuple(batch) and s[-2] == k, want
        )
        if b is None or (a.size // k) * b.shape[-1] > self.opts.max_elements:
            return None
        lo, hi = k * a.lo * b.lo, k * a.hi * b.hi
        return self.emit(cls(a.value, b.value), lo, hi, joint_phase(a.phase, b.phase))

    def add_concat(self, cls: type[Operation]) -> Val | None:
        a = self.pick()
        if a is None:
            return None
        dim = int(self.rng.integers(len(a.shape)))

        def same_but_dim(s: tuple[int, ...]) -> bool:
            return len(s) == len(a.shape) and all(
                x == y
                for i, (x, y) in enumerate(zip(s, a.shape, strict=True))
                if i != dim
            )

        want = tuple(self.dim() if i == dim else d for i, d in enumerate(a.shape))
        b = self.partner(a, same_but_dim, want) or a
        if a.size + b.size > self.opts.max_elements:
            return None
        lo, hi = min(a.lo, b.lo), max(a.hi, b.hi)
        return self.emit(
            cls(a.value, b.value, dim), lo, hi, joint_phase(a.phase, b.phase)
        )

    def add_slice(self, cls: type[Operation]) -> Val | None:
        """A window of one dim of at least two elements (values keep their
        interval)."""
        a = self.pick()
        if a is None:
            return None
        dim = int(self.rng.integers(len(a.shape)))
        n = a.shape[dim]
        if n < 2:
            return None
        start = int(self.rng.integers(n - 1))
        end = int(self.rng.integers(start + 1, n + 1))
        return self.emit(cls(a.value, dim, start, end), a.lo, a.hi, a.phase)

    def add_broadcast(self, cls: type[Operation]) -> Val | None:
        """Its size-1 dims stretched to drawn sizes (the rank kept, so later
        ops still meet operands of equal rank)."""
        a = self.pick()
        if a is None or 1 not in a.shape:
            return None
        shape = tuple(self.dim() if d == 1 else d for d in a.shape)
        if math.prod(shape) > self.opts.max_elements:
            return None
        return self.emit(cls(a.value, shape), a.lo, a.hi, a.phase)

    def add_layout(self, cls: type[Operation], kind: str) -> Val | None:
        """A swap of two dims, or a reshape of the last two dims into the same
        rank (``[.., a, b]`` to ``[.., 2a, b/2]`` or ``[.., a/2, 2b]``), so later
        ops still meet operands of equal rank."""
        a = self.pick(lambda v: len(v.shape) >= 2)
        if a is None:
            return None
        rank = len(a.shape)
        if kind == "transpose":
            d0, d1 = (int(d) for d in self.rng.choice(rank, 2, replace=False))
            return self.emit(cls(a.value, d0, d1), a.lo, a.hi, a.phase)
        *lead, m, n = a.shape
        options = [(2 * m, n // 2)] if n % 2 == 0 else []
        options += [(m // 2, 2 * n)] if m % 2 == 0 else []
        if not options:
            return None
        m2, n2 = options[int(self.rng.integers(len(options)))]
        return self.emit(cls(a.value, (*lead, m2, n2)), a.lo, a.hi, a.phase)

    def add_accum(self, a: Val | None, reduction: str | None = None) -> Val | None:
        """``block.forloop_accum`` of ``a`` (or a random non-accumulated value)."""
        a = a or self.pick(lambda v: v.phase != Phase.POST)
        if a is None:
            return None
        reduction = reduction or self.choice(self.opts.reductions)
        forloop = self.forloop_range
        n = a.shape[-1] if reduction == "sum" else 1
        scale = forloop * n if reduction in ("none", "sum") else 1
        op = block.ForloopAccumOp(a.value, reduction)
        return self.emit(op, a.lo * scale, a.hi * scale, Phase.POST)

    def steps(
        self,
        count: int,
        draw: Callable[[], str],
        extra: Callable[[str], Val | None] | None = None,
    ) -> None:
        """Add up to ``count`` ops of kinds from ``draw`` (a few tries each).

        Kinds this level has no arithmetic op for go to ``extra``.
        """
        for _ in range(count):
            for _attempt in range(4):
                kind = draw()
                if kind in self.ops:
                    made = self.add_arith(kind)
                else:
                    made = extra(kind) if extra else None
                if made is not None:
                    break

    def sinks(self) -> list[Val]:
        """Pool values no op in this graph uses."""
        return [v for v in self.pool if not v.value.uses]
