"""Random ``kernel.customized`` ops: their block graphs (tiles loaded with
random grids, imaps, fmaps and for-loop ranges, block ops, ``forloop_accum``
of every reduction kind, tiles saved with random omaps) and the
``block.thread_graph`` ops inside them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.ir import Block, Operation, Region, SSAValue

from mirage_xdsl.dialects import block, kernel, shapes, thread
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import Phase
from mirage_xdsl.fuzz.level_graph import Graph
from mirage_xdsl.fuzz.values import (
    Val,
    broadcastable,
    fuzzed,
    joint_phase,
    phases_mix,
)
from mirage_xdsl.gpu_target import H100
from mirage_xdsl.ops import Form, kinds

GRID_SIZES = (1, 1, 1, 2, 2, 3, 4, 8)
FORLOOP_RANGES = (1, 1, 2, 2, 3, 4, 8)
BLOCK_SHAPES = ((128, 1, 1), (256, 1, 1), (64, 1, 1), (32, 1, 1), (32, 4, 1))
BLOCK_OPS = t.by_kind(block.BlockDialect)
THREAD_OPS = t.by_kind(thread.Thread)

# --- thread graphs -----------------------------------------------------------

THREAD_MENU = tuple(filter(fuzzed, THREAD_OPS))
"""Thread graphs are element-wise chains: every thread op but the terminator."""


def add_thread_graph(g: Graph) -> Val | None:
    """A ``block.thread_graph`` over one or two tiles of ``g``."""
    a = g.pick()
    if a is None:
        return None
    operands = [a]
    if g.coin(0.5):
        b = g.pick(
            lambda v: broadcastable(a.shape, v.shape) and phases_mix(a.phase, v.phase)
        )
        if b is not None and b is not a:
            operands.append(b)
    body = Block(arg_types=[v.value.type for v in operands])
    inner = Graph(g.rng, g.opts, THREAD_OPS, body, fresh=lambda s, p: None)
    inner.pool = [
        Val(arg, v.lo, v.hi) for arg, v in zip(body.args, operands, strict=True)
    ]
    menu = g.opts.menu(THREAD_MENU)
    if not menu:
        return None
    inner.steps(int(g.rng.integers(1, 4)), lambda: g.choice(menu))
    made = [v for v in inner.pool if isinstance(v.value.owner, Operation)]
    if not made:
        return None
    yielded = [made[-1]] + ([made[0]] if len(made) > 1 and g.coin(0.3) else [])
    body.add_op(thread.YieldOp([v.value for v in yielded]))
    op = block.ThreadGraphOp(
        [v.value for v in operands], [v.value.type for v in yielded], Region(body)
    )
    phase = joint_phase(*(v.phase for v in operands))
    lo = min(v.lo for v in yielded)
    hi = max(v.hi for v in yielded)
    return g.emit(op, lo, hi, phase)


# --- customized kernels ------------------------------------------------------

BLOCK_MENU = (
    "matmul",
    *filter(fuzzed, kinds(Form.BINARY, level="block")),
    *filter(fuzzed, kinds(Form.UNARY, level="block")),
    *filter(fuzzed, kinds(Form.SCALAR, level="block")),
    *kinds(Form.NORM, Form.REDUCTION, Form.CONCAT, Form.TRANSPOSE, level="block"),
    "forloop_accum",
    "forloop_accum",
)
"""Block-level kinds, by form: the generator draws by position, so this order
is part of what a seed means (``thread_graph`` is drawn separately, by its
probability)."""


@dataclass
class Customized:
    """A ``kernel.customized`` op under construction."""

    kg: Graph
    grid: tuple[int, int, int]
    forloop: int
    threads: tuple[int, int, int]
    body: Block = field(default_factory=Block)
    sources: list[Val] = field(default_factory=list)
    bg: Graph = field(init=False)

    def __post_init__(self) -> None:
        self.bg = Graph(
            self.kg.rng,
            self.kg.opts,
            BLOCK_OPS,
            self.body,
            self.fresh_tile,
            budget=H100.shared_memory_per_block,
        )
        self.bg.forloop_range = self.forloop

    def arg_of(self, source: Val) -> SSAValue:
        if source not in self.sources:
            self.sources.append(source)
            self.body.insert_arg(source.value.type, len(self.body.args))
        return self.body.args[self.sources.index(source)]

    def load(self, source: Val, imap: Sequence[int], fmap: int) -> Val | None:
        shape = shapes.tile_shape(source.shape, imap, fmap, self.grid, self.forloop)
        tile = t.result_type_like(source.value, shape)
        op = block.InputOp(self.arg_of(source), imap, fmap, tile)
        phase = Phase.LOOP if fmap != -1 else Phase.INVARIANT
        return self.bg.emit(op, source.lo, source.hi, phase)

    def random_load(self, source: Val) -> Val | None:
        """Load ``source`` with a random imap and fmap that divide its dims."""
        g, shape = self.kg, list(source.shape)
        imap = [-1, -1, -1]
        for axis in g.rng.permutation(3):
            size = self.grid[axis]
            dims = [
                d for d in range(len(shape)) if d not in imap and shape[d] % size == 0
            ]
            if dims and (size > 1 or g.coin(0.2)) and g.coin(0.8):
                d = g.choice(dims)
                imap[axis] = d
                shape[d] //= size
        dims = [d for d in range(len(shape)) if shape[d] % self.forloop == 0]
        fmap = g.choice(dims) if dims and g.coin(0.6) else -1
        return self.load(source, imap, fmap)

    def fresh_tile(
        self, tile: tuple[int, ...], phases: tuple[Phase, ...]
    ) -> Val | None:
        """A loader of a new kernel input whose tiles have shape ``tile``."""
        g = self.kg
        shape = list(tile)
        imap = [-1, -1, -1]
        free = list(range(len(tile)))
        for axis in g.rng.permutation(3):
            if free and (self.grid[axis] > 1 or g.coin(0.2)) and g.coin(0.7):
                d = free.pop(int(g.rng.integers(len(free))))
                imap[axis] = d
                shape[d] *= self.grid[axis]
        phase = g.choice(phases)
        fmap = -1
        if phase == Phase.LOOP:
            fmap = int(g.rng.integers(len(tile)))
            shape[fmap] *= self.forloop
        if math.prod(shape) > g.opts.max_elements:
            return None
        source = g.fresh(tuple(shape), (Phase.INVARIANT,))
        return self.load(source, imap, fmap) if source else None

    def outputs(self) -> list[tuple[Val, list[int]]]:
        """Save some of the block graph's results, each with a random omap.

        Per-iteration values are accumulated first when the loop runs more
        than once (the verifier requires it).
        """
        g = self.bg
        sinks = [v for v in g.sinks() if not isinstance(v.value.owner, block.InputOp)]
        sinks = sinks or g.pool[-1:]
        chosen = [sinks[i] for i in sorted(g.rng.permutation(len(sinks))[:3])]
        saved: list[tuple[Val, list[int]]] = []
        for v in chosen:
            if v.phase == Phase.LOOP and self.forloop > 1:
                v = g.add_accum(v) or g.add_accum(v, self.safe_reduction())
                if v is None:
                    continue
            omap = self.random_omap(len(v.shape))
            g.block.add_op(block.OutputOp(v.value, omap))
            saved.append((v, omap))
        return saved

    def safe_reduction(self) -> str | None:
        """An allowed reduction whose result stays in its operand's range."""
        safe = [r for r in ("mean", "rms") if r in self.kg.opts.reductions]
        return safe[0] if safe else None

    def random_omap(self, rank: int) -> list[int]:
        """Every grid dim of size > 1 takes a distinct tile dim; others may."""
        free = [int(d) for d in self.kg.rng.permutation(rank)]
        omap = [-1, -1, -1]
        for axis in sorted(range(3), key=lambda a: self.grid[a] == 1):
            if self.grid[axis] > 1 or (free and self.kg.coin(0.2)):
                omap[axis] = free.pop()
        return omap

    def finish(self, saved: Sequence[tuple[Val, list[int]]]) -> list[Val]:
        """Wrap the block graph into a ``kernel.customized`` op."""
        types = [
            t.result_type_like(v.value, shapes.stitched_shape(v.shape, omap, self.grid))
            for v, omap in saved
        ]
        op = kernel.CustomizedOp(
            [s.value for s in self.sources],
            types,
            Region(self.body),
            grid=self.grid,
            block=self.threads,
            forloop_range=self.forloop,
        )
        self.kg.block.add_op(op)
        results = [
            Val(r, v.lo, v.hi) for r, (v, _) in zip(op.results, saved, strict=True)
        ]
        self.kg.pool.extend(results)
        return results


def add_customized(kg: Graph) -> Val | None:
    """A ``kernel.customized`` op over one or two existing kernel values."""
    first = kg.pick()
    if first is None:
        return None
    sources = [first]
    if kg.coin(0.4):
        other = kg.pick()
        if other is not None and other is not first:
            sources.append(other)
    max_split = min(len(s.shape) for s in sources)
    grid = [kg.choice(GRID_SIZES) for _ in range(3)]
    while sum(s > 1 for s in grid) > max_split:
        grid[grid.index(max(grid))] = 1
    c = Customized(kg, tuple(grid), kg.choice(FORLOOP_RANGES), kg.choice(BLOCK_SHAPES))  # type: ignore[arg-type]
    for s in sources:
        c.random_load(s)

    def extra(kind: str) -> Val | None:
        return add_thread_graph(c.bg) if kind == "thread_graph" else None

    menu = kg.opts.menu(BLOCK_MENU)

    def draw() -> str:
        if kg.opts.allowed("thread_graph") and kg.coin(kg.opts.thread_graph_prob):
            return "thread_graph"
        return kg.choice(menu) if menu else "thread_graph"

    c.bg.steps(int(kg.rng.integers(1, kg.opts.max_block_ops + 1)), draw, extra)
    saved = c.outputs()
    if not saved:
        return None
    return c.finish(saved)[0]
