"""Emitting GPU-level IR: index arithmetic that folds constants, loops, conditions.

The block-op lowerings speak in tile coordinates (``row * stride + col``) that
are mostly compile-time constants. ``Ix`` values are either Python ints or SSA
values of ``index`` type; the helpers below fold integer arithmetic and only
emit ``arith`` ops for what depends on thread, block or loop indices, so the
generated IR (and the CUDA C printed from it) stays readable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from xdsl.builder import Builder
from xdsl.dialects import arith, math, memref, scf, vector
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    VectorType,
    f32,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint

from mirage_xdsl.ops import MATH

Ix = int | SSAValue
"""An index: a compile-time constant or an ``index`` SSA value."""


class GpuBuilder:
    """Appends ops at an insertion point; ``region``-building helpers move it."""

    def __init__(self, block: Block):
        self.builder = Builder(InsertPoint.at_end(block))

    def insert(self, op: Operation) -> Operation:
        return self.builder.insert(op)

    def value(self, op: Operation) -> SSAValue:
        return self.insert(op).results[0]

    # --- constants and index arithmetic -----------------------------------

    def index(self, x: Ix) -> SSAValue:
        if isinstance(x, SSAValue):
            return x
        return self.value(arith.ConstantOp(IntegerAttr(x, IndexType())))

    def f32(self, x: float) -> SSAValue:
        return self.value(arith.ConstantOp(FloatAttr(x, f32)))

    def add(self, a: Ix, b: Ix) -> Ix:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if a == 0:
            return b
        if b == 0:
            return a
        return self.value(arith.AddiOp(self.index(a), self.index(b)))

    def mul(self, a: Ix, b: Ix) -> Ix:
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        if a == 0 or b == 0:
            return 0
        if a == 1:
            return b
        if b == 1:
            return a
        return self.value(arith.MuliOp(self.index(a), self.index(b)))

    def div(self, a: Ix, b: int) -> Ix:
        if isinstance(a, int):
            return a // b
        if b == 1:
            return a
        return self.value(arith.DivUIOp(a, self.index(b)))

    def rem(self, a: Ix, b: int) -> Ix:
        if isinstance(a, int):
            return a % b
        if b == 1:
            return 0
        return self.value(arith.RemUIOp(a, self.index(b)))

    def min(self, a: Ix, b: Ix) -> Ix:
        if isinstance(a, int) and isinstance(b, int):
            return min(a, b)
        return self.value(arith.MinUIOp(self.index(a), self.index(b)))

    def lt(self, a: Ix, b: Ix) -> SSAValue:
        return self.value(arith.CmpiOp(self.index(a), self.index(b), "ult"))

    def linear(self, terms: Sequence[tuple[Ix, int]]) -> Ix:
        """sum(index * stride)."""
        out: Ix = 0
        for x, stride in terms:
            out = self.add(out, self.mul(x, stride))
        return out

    def unravel(self, flat: Ix, shape: Sequence[int]) -> list[Ix]:
        """Row-major multi-index of ``flat`` in ``shape``."""
        out: list[Ix] = []
        for i, size in enumerate(shape):
            inner = 1
            for s in shape[i + 1 :]:
                inner *= s
            q = self.div(flat, inner)
            out.append(self.rem(q, size) if i else q)
        return out

    # --- floats ----------------------------------------------------------

    def to_f32(self, x: SSAValue) -> SSAValue:
        if isinstance(x.type, Float32Type):
            return x
        return self.value(arith.ExtFOp(x, f32))

    def from_f32(self, x: SSAValue, ty: Attribute) -> SSAValue:
        if ty == x.type:
            return x
        return self.value(arith.TruncFOp(x, ty))

    def addf(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.AddfOp(a, b))

    def mulf(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.MulfOp(a, b))

    def divf(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.DivfOp(a, b))

    def math(self, name: str, a: SSAValue) -> SSAValue:
        """The scalar function ``name`` of :data:`ops.MATH` applied to ``a``."""
        return self.value(getattr(math, MATH[name].xdsl_op)(a))

    def exp(self, a: SSAValue) -> SSAValue:
        return self.math("exp", a)

    def sqrt(self, a: SSAValue) -> SSAValue:
        return self.math("sqrt", a)

    def negf(self, a: SSAValue) -> SSAValue:
        return self.value(arith.NegfOp(a))

    def maxf(self, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.MaximumfOp(a, b))

    def cmpf(self, a: SSAValue, b: SSAValue, predicate: str) -> SSAValue:
        return self.value(arith.CmpfOp(a, b, predicate))

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.value(arith.SelectOp(cond, a, b))

    def zeros(self, ty: VectorType) -> SSAValue:
        return self.value(
            arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(ty, [0.0]))
        )

    def extract(self, v: SSAValue, pos: int) -> SSAValue:
        return self.value(vector.ExtractOp(v, [pos], f32))

    # --- memory ----------------------------------------------------------

    def load(self, ref: SSAValue, indices: Sequence[Ix]) -> SSAValue:
        return self.value(memref.LoadOp.get(ref, [self.index(i) for i in indices]))

    def store(self, value: SSAValue, ref: SSAValue, indices: Sequence[Ix]) -> None:
        self.insert(memref.StoreOp.get(value, ref, [self.index(i) for i in indices]))

    def load_f32(self, ref: SSAValue, indices: Sequence[Ix]) -> SSAValue:
        return self.to_f32(self.load(ref, indices))

    def store_f32(self, value: SSAValue, ref: SSAValue, indices: Sequence[Ix]) -> None:
        assert isinstance(ref.type, MemRefType)
        self.store(self.from_f32(value, ref.type.element_type), ref, indices)

    # --- structured control flow -------------------------------------------

    def loop(
        self,
        lb: Ix,
        ub: Ix,
        step: Ix,
        body: Callable[[SSAValue, Sequence[SSAValue]], Sequence[SSAValue]],
        inits: Sequence[SSAValue] = (),
    ) -> Sequence[SSAValue]:
        """``scf.for``; ``body(iv, carried)`` returns the next carried values."""
        block = Block(arg_types=[IndexType(), *(v.type for v in inits)])
        op = scf.ForOp(
            self.index(lb), self.index(ub), self.index(step), list(inits), Region(block)
        )
        self.insert(op)
        outer = self.builder.insertion_point
        self.builder.insertion_point = InsertPoint.at_end(block)
        carried = body(block.args[0], block.args[1:])
        self.insert(scf.YieldOp(*carried))
        self.builder.insertion_point = outer
        return op.results

    def strided(
        self, start: Ix, count: int, step: int, body: Callable[[Ix], None]
    ) -> None:
        """``for (i = start; i < count; i += step) body(i)``, the block-stride loop.

        With ``start`` a thread index below ``step`` and ``count`` a multiple of
        ``step`` the trip count is the same for every thread; otherwise the
        loop bound guards the tail.
        """
        if isinstance(start, int) and start + step >= count:
            if start < count:
                body(start)
            return

        def run(i: SSAValue, _: Sequence[SSAValue]) -> Sequence[SSAValue]:
            body(i)
            return ()

        self.loop(start, count, step, run)

    @contextmanager
    def when(self, cond: SSAValue | None) -> Iterator[None]:
        """Emit the body under ``scf.if cond`` (unconditionally for ``None``)."""
        if cond is None:
            yield
            return
        block = Block()
        op = scf.IfOp(cond, [], Region(block))
        self.insert(op)
        outer = self.builder.insertion_point
        self.builder.insertion_point = InsertPoint.at_end(block)
        yield
        self.insert(scf.YieldOp())
        self.builder.insertion_point = outer
