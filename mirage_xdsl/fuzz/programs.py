"""Random valid µGraphs, for fuzzing every subsystem that consumes them.

:func:`random_module` builds a seeded random program at all three levels: a
``func.func @main`` of kernel ops over random small tensors, some of them
``kernel.customized`` ops whose block graphs load tiles with random grids,
imaps, fmaps and for-loop ranges, compute with block ops (``forloop_accum``
of every reduction kind, ``concat``, ``thread_graph`` holding thread ops) and
save tiles with random omaps.

The generator builds valid graphs by construction, not by rejection: it only
picks operands whose shapes, element types and for-loop phases fit the op, and
only partition maps that divide. Every generated module passes
:func:`mirage_xdsl.ir.diagnostics.verify`; the tests check that on thousands of
seeds.

The generated programs are also numerically tame. Each value carries an
interval that bounds it when every input lies in ``[INPUT_LOW, INPUT_HIGH]``
(all positive, so every op is monotone on it), and an op is only added when
its result stays within ``[VALUE_MIN, VALUE_MAX]``. So on inputs from
:func:`random_inputs` the float interpreter, and fp16 GPU code, give finite,
normal values: a wrong result is a bug, never an overflow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from mirage_xdsl.dialects import block, kernel, shapes, thread
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import Phase, tile_bytes
from mirage_xdsl.gpu_target import H100
from mirage_xdsl.ir.builder import float16
from mirage_xdsl.ops import OPS, Form, elementwise_kinds, kinds
from mirage_xdsl.semantics import inputs

INPUT_LOW, INPUT_HIGH = 0.5, 1.0
"""Inputs the value intervals assume (see :func:`random_inputs`)."""

VALUE_MIN, VALUE_MAX = 1e-3, 1e4
"""Every intermediate value stays in this range on such inputs (fp16-safe)."""

DIMS = (1, 2, 4, 8, 16, 32, 64, 3, 6, 12, 24, 48)
DIM_WEIGHTS = np.array([2, 3, 4, 4, 3, 2, 1, 1, 1, 1, 1, 1], dtype=float)
GRID_SIZES = (1, 1, 1, 2, 2, 3, 4, 8)
FORLOOP_RANGES = (1, 1, 2, 2, 3, 4, 8)
BLOCK_SHAPES = ((128, 1, 1), (256, 1, 1), (64, 1, 1), (32, 1, 1), (32, 4, 1))


def fuzzed(kind: str) -> bool:
    """Whether the generator draws ``kind``: every op but the element-wise ones
    without a value interval (:attr:`OpSpec.interval`). ``neg`` has none:
    every value the generator makes is positive (its intervals and the
    fp16-safe range assume so)."""
    spec = OPS[kind]
    return not spec.elementwise or spec.interval is not None


UNFUZZED = frozenset(k for k in elementwise_kinds() if not fuzzed(k))
"""Kinds the generator never draws."""

RMS_EPS = (0.0, 0.0, 1e-6, 1e-2)
"""Epsilons drawn for rms_norm (half the time none)."""

KERNEL_OPS = t.by_kind(kernel.Kernel)
BLOCK_OPS = t.by_kind(block.BlockDialect)
THREAD_OPS = t.by_kind(thread.Thread)


@dataclass(eq=False)
class Val:
    """A value the generator may use, with its interval and for-loop phase."""

    value: SSAValue
    lo: float
    hi: float
    phase: Phase = Phase.INVARIANT

    @property
    def shape(self) -> tuple[int, ...]:
        return t.tensor_shape(self.value)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def in_range(lo: float, hi: float) -> bool:
    return VALUE_MIN <= lo and hi <= VALUE_MAX


def phases_mix(*phases: Phase) -> bool:
    """Whether values of these phases may meet in one op (see customized.py)."""
    return not {Phase.LOOP, Phase.POST} <= set(phases)


def joint_phase(*phases: Phase) -> Phase:
    return max(phases, key=lambda p: p.value)


def broadcastable(a: Sequence[int], b: Sequence[int]) -> bool:
    try:
        shapes.broadcast(a, b)
    except shapes.ShapeError:
        return False
    return True


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


KERNEL_MENU = tuple(filter(fuzzed, KERNEL_OPS))

KINDS = tuple(dict.fromkeys([*KERNEL_MENU, *BLOCK_MENU, "customized", "thread_graph"]))
"""Every op kind :func:`random_module` can be restricted to."""


def random_module(
    rng: np.random.Generator,
    *,
    max_ops: int = 6,
    max_block_ops: int = 6,
    customized_prob: float = 0.3,
    thread_graph_prob: float = 0.15,
    max_elements: int = 4096,
    dtypes: Sequence[Attribute] = (float16,),
    kinds: Collection[str] | None = None,
    reductions: Sequence[str] = block.ACCUM_REDUCTIONS,
) -> ModuleOp:
    """A random valid µGraph: ``func.func @main`` of kernel and customized ops.

    ``rng`` alone decides the module (same seed, same text). ``max_ops``
    bounds the kernel-level ops (at least one is made), ``max_block_ops`` the
    ops of each block graph; ``customized_prob`` is the chance that a
    kernel-level op is a ``kernel.customized``; ``thread_graph_prob`` the
    chance that a block-level op is a ``block.thread_graph``. Tensors have at
    most ``max_elements`` elements (except stitched customized results, which
    later ops do not read) and one element type drawn from ``dtypes``. Every
    value unused inside the function is returned, except the reshapes no
    kernel would write (:func:`drop_unwritten_views`), so both GPU backends
    take every module. See the module docstring for
    the value ranges on inputs from :func:`random_inputs`.

    ``kinds`` (default: all) restricts the ops to these ``KIND`` names (see
    :data:`KINDS`), ``"customized"`` and ``"thread_graph"`` included;
    ``reductions`` the ``block.forloop_accum`` reductions. A per-iteration
    value that a block saves is accumulated whatever ``kinds`` says, since the
    verifier requires it.
    """
    unknown = set(kinds or ()) - set(KINDS)
    if unknown or not set(reductions) <= set(block.ACCUM_REDUCTIONS):
        raise ValueError(f"unknown kinds or reductions: {sorted(unknown)}")
    opts = Options(
        max_ops, max_block_ops, max_elements, customized_prob, thread_graph_prob,
        tuple(dtypes), None if kinds is None else frozenset(kinds),
        tuple(reductions),
    )  # fmt: skip
    kernel_menu = opts.menu(KERNEL_MENU)
    dtype = opts.dtypes[int(rng.integers(len(opts.dtypes)))]
    body = Block()

    def fresh(shape: tuple[int, ...], phases: tuple[Phase, ...]) -> Val:
        arg = body.insert_arg(TensorType(dtype, list(shape)), len(body.args))
        kg.pool.append(Val(arg, INPUT_LOW, INPUT_HIGH))
        return kg.pool[-1]

    kg = Graph(rng, opts, KERNEL_OPS, body, fresh)
    for _ in range(int(rng.integers(1, 3))):
        rank = int(rng.integers(2, 5))
        shape = [kg.dim() for _ in range(rank)]
        while math.prod(shape) > max_elements:
            shape[int(np.argmax(shape))] //= 2
        fresh(tuple(shape), (Phase.INVARIANT,))

    def extra(kind: str) -> Val | None:
        return add_customized(kg) if kind == "customized" else None

    def draw() -> str:
        if opts.allowed("customized") and kg.coin(customized_prob):
            return "customized"
        return kg.choice(kernel_menu) if kernel_menu else "customized"

    kg.steps(int(rng.integers(1, max_ops + 1)), draw, extra)
    drop_unwritten_views(kg)
    for _ in range(16 if not body.ops else 0):
        kg.steps(1, (lambda: "sqrt") if kinds is None else draw, extra)
        if body.ops:
            break
    outputs = [v.value for v in kg.sinks() if isinstance(v.value.owner, Operation)]
    body.add_op(func.ReturnOp(*outputs))
    fn = func.FuncOp(
        "main",
        ([a.type for a in body.args], [v.type for v in outputs]),
        Region(body),
    )
    return ModuleOp([fn])


def drop_unwritten_views(kg: Graph) -> None:
    """Erase the unused reshapes no kernel would write, were they returned:
    those of an input, and all but one of the unused views of one value (a
    reshape is a buffer alias on the GPU, ``lowering/aliases.py``)."""
    storage: dict[SSAValue, SSAValue] = {}
    for v in kg.pool:
        op = v.value.owner
        view = isinstance(op, kernel.ReshapeOp)
        storage[v.value] = storage[op.input] if view else v.value  # type: ignore[union-attr]
    while True:
        kept: set[SSAValue] = set()
        dead = []
        for v in kg.sinks():
            root = storage[v.value]
            unwritten = not isinstance(root.owner, Operation) or root in kept
            if isinstance(v.value.owner, kernel.ReshapeOp) and unwritten:
                dead.append(v)
            kept.add(root)
        if not dead:
            return
        for v in dead:
            kg.pool.remove(v)
            v.value.owner.detach()
            v.value.owner.erase()


def random_inputs(module: ModuleOp, seed: int = 0) -> list[np.ndarray]:
    """fp16 inputs in ``[INPUT_LOW, INPUT_HIGH]``, where the value ranges hold."""
    return inputs.random_inputs(module, seed, INPUT_LOW, INPUT_HIGH)


__all__ = [
    "INPUT_HIGH",
    "KINDS",
    "INPUT_LOW",
    "VALUE_MAX",
    "VALUE_MIN",
    "random_inputs",
    "random_module",
]
