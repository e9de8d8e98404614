"""The Python builder: µGraphs built op by op, close to the original project's API.

::

    import mirage_xdsl as mi
    g = mi.new_kernel_graph()
    Q = g.new_input(dims=(2, 256, 64), dtype=mi.float16)
    K = g.new_input(dims=(2, 64, 4096), dtype=mi.float16)
    V = g.new_input(dims=(2, 4096, 64), dtype=mi.float16)
    A = g.matmul(Q, K)
    E = g.exp(A)
    S = g.reduction(E, 2)
    O = g.matmul(g.div(E, S), V)
    g.mark_output(O)
    module = g.module()          # an xDSL ModuleOp holding func.func @main

Block graphs for ``kernel.customized`` are built the same way with
:func:`new_threadblock_graph` and attached with :meth:`KernelGraph.customized`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    ModuleOp,
    TensorType,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from mirage_xdsl.dialects import block, kernel, shapes
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ops import OPS, Form

float16: Attribute = Float16Type()
bfloat16: Attribute = BFloat16Type()
float32: Attribute = Float32Type()


def _unary(cls: type[t.TensorOp]) -> Callable[..., SSAValue]:
    def method(self: _Builder, a: SSAValue) -> SSAValue:
        return self._add(cls(a))

    return method


def _scalar(cls: type[t.TensorOp]) -> Callable[..., SSAValue]:
    def method(self: _Builder, a: SSAValue, c: float) -> SSAValue:
        return self._add(cls(a, c))

    return method


def _binary(cls: type[t.TensorOp]) -> Callable[..., SSAValue]:
    def method(self: _Builder, a: SSAValue, b: SSAValue) -> SSAValue:
        a, b = unstretched(a, b, shapes.broadcast)
        return self._add(cls(a, b))

    return method


def unstretched(
    a: SSAValue, b: SSAValue, rule: Callable[..., tuple[int, ...]]
) -> tuple[SSAValue, SSAValue]:
    """``a`` and ``b``, each ``kernel.broadcast`` replaced by its operand where
    the op (whose shape ``rule`` gives) broadcasts it to the same result by
    itself: the stretched copy is then never made (``function`` drops a
    broadcast nothing reads)."""
    want = rule(t.tensor_shape(a), t.tensor_shape(b))
    for i in (0, 1):
        pair = [a, b]
        owner = pair[i].owner
        if not isinstance(owner, kernel.BroadcastOp):
            continue
        pair[i] = owner.input
        try:
            same = rule(*(t.tensor_shape(v) for v in pair)) == want
        except shapes.ShapeError:
            same = False
        if same:
            a, b = pair
    return a, b


ELEMENTWISE_METHODS = {Form.UNARY: _unary, Form.SCALAR: _scalar, Form.BINARY: _binary}
"""The builder method of each element-wise form, from its level's op class:
``g.exp(a)``, ``g.mul_scalar(a, c)``, ``g.add(a, b)`` (broadcasting)."""


class _Builder:
    """Shared by the kernel and block builders: append ops to one block.

    Each subclass gets one method per element-wise op of its level's dialect
    (``level.ELEMENTWISE_OPS``), named after the kind and documented by its
    op table entry, so a new table entry is a new builder method.
    """

    level: ModuleType

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for kind, op in cls.level.ELEMENTWISE_OPS.items():
            method = ELEMENTWISE_METHODS[OPS[kind].form](op)
            method.__name__ = kind
            method.__qualname__ = f"{cls.__name__}.{kind}"
            method.__doc__ = OPS[kind].doc
            setattr(cls, kind, method)

    def __init__(self) -> None:
        self.block = Block()

    def _add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def _op(self, kind: str) -> type:
        return getattr(self.level, kind)

    def matmul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        """``a @ b`` over the last two dims, batch dims broadcast."""
        a, b = unstretched(a, b, shapes.matmul)
        return self._add(self._op("MatmulOp")(a, b))

    def rms_norm(self, a: SSAValue, eps: float = 0.0) -> SSAValue:
        """``a / sqrt(mean(a^2) + eps)`` over the last dim."""
        return self._add(self._op("RmsNormOp")(a, eps))

    def reduction(self, a: SSAValue, dim: int) -> SSAValue:
        """Sum over ``dim``, keeping it with size 1."""
        return self._add(self._op("ReduceSumOp")(a, dim))

    reduce_sum = reduction

    def reduce_max(self, a: SSAValue, dim: int) -> SSAValue:
        """Maximum over ``dim``, keeping it with size 1."""
        return self._add(self._op("ReduceMaxOp")(a, dim))

    def transpose(self, a: SSAValue, dim0: int, dim1: int) -> SSAValue:
        """``a`` with dims ``dim0`` and ``dim1`` swapped."""
        return self._add(self._op("TransposeOp")(a, dim0, dim1))

    def concat(self, a: SSAValue, b: SSAValue, dim: int) -> SSAValue:
        """``a`` and ``b`` joined along ``dim`` (``torch.cat``); the other dims
        must agree."""
        return self._add(self._op("ConcatOp")(a, b, dim))


class KernelGraph(_Builder):
    """Builds a kernel-level program: one ``func.func`` of device tensors."""

    level = kernel

    def __init__(self, name: str = "main") -> None:
        super().__init__()
        self.name = name
        self.outputs: list[SSAValue] = []

    def reshape(self, a: SSAValue, shape: Sequence[int]) -> SSAValue:
        """``a`` in row-major order with another shape of as many elements."""
        return self._add(kernel.ReshapeOp(a, tuple(shape)))

    def broadcast(self, a: SSAValue, shape: Sequence[int]) -> SSAValue:
        """``a`` stretched to ``shape`` along its size-1 dims (and new leading
        ones), numpy's ``broadcast_to`` (``torch.expand``)."""
        return self._add(kernel.BroadcastOp(a, tuple(shape)))

    expand = broadcast

    def cast(self, a: SSAValue, dtype: Attribute) -> SSAValue:
        """``a``'s values stored as ``dtype`` (``float16``, ``bfloat16`` or
        ``float32``); kernels compute in fp32, so only the storage changes."""
        return self._add(kernel.CastOp(a, dtype))

    def slice(self, a: SSAValue, dim: int, start: int, end: int) -> SSAValue:
        """Elements ``start`` to ``end`` (exclusive) of ``a`` along ``dim``:
        ``a[..., start:end, ...]``."""
        return self._add(kernel.SliceOp(a, dim, start, end))

    def split(self, a: SSAValue, sizes: Sequence[int], dim: int) -> list[SSAValue]:
        """``a`` cut along ``dim`` into consecutive slices of ``sizes``
        (``torch.split``); they must add up to the dim."""
        total = t.tensor_shape(a)[dim] if 0 <= dim < len(t.tensor_shape(a)) else None
        if total is not None and sum(sizes) != total:
            raise shapes.ShapeError(
                f"split sizes {list(sizes)} do not add up to dim {dim} (size {total})"
            )
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        return [
            self.slice(a, dim, s, s + n) for s, n in zip(starts, sizes, strict=True)
        ]

    def all_reduce(self, a: SSAValue, shards: int) -> SSAValue:
        """The sum of ``a`` over the ``shards`` shards of a tensor-parallel program."""
        return self._add(kernel.AllReduceOp(a, shards))

    def new_input(self, dims: Sequence[int], dtype: Attribute = float16) -> SSAValue:
        return self.block.insert_arg(
            TensorType(dtype, list(dims)), len(self.block.args)
        )

    def mark_output(self, value: SSAValue) -> None:
        self.outputs.append(value)

    def customized(
        self, inputs: Sequence[SSAValue], graph: BlockGraph
    ) -> list[SSAValue]:
        """Add a graph-defined kernel; returns its outputs in ``new_output`` order."""
        missing = [v for v in graph.sources if v not in inputs]
        if missing:
            raise ValueError("block graph reads a tensor not passed to customized()")
        op = graph.customized_op()
        self.block.add_op(op)
        return list(op.results)

    def function(self) -> func.FuncOp:
        """The finished ``func.func``; broadcasts nothing reads (an operation
        reads its operand instead, see :func:`unstretched`) are dropped."""
        for op in reversed(list(self.block.ops)):
            unread = not any(r.uses for r in op.results)
            if isinstance(op, kernel.BroadcastOp) and unread:
                if op.result not in self.outputs:
                    op.detach()
                    op.erase()
        self.block.add_op(func.ReturnOp(*self.outputs))
        inputs = [a.type for a in self.block.args]
        outputs = [v.type for v in self.outputs]
        return func.FuncOp(self.name, (inputs, outputs), Region(self.block))

    def module(self) -> ModuleOp:
        """The finished program; the graph must not be used afterwards."""
        module = ModuleOp([self.function()])
        module.verify()
        return module


class BlockGraph(_Builder):
    """Builds the block graph of one ``kernel.customized`` op."""

    level = block

    def __init__(
        self,
        grid_dims: Sequence[int],
        block_dims: Sequence[int] = (128, 1, 1),
        forloop_range: int = 1,
    ) -> None:
        super().__init__()
        self.grid_dims = tuple(grid_dims) + (1,) * (3 - len(grid_dims))
        self.block_dims = tuple(block_dims) + (1,) * (3 - len(block_dims))
        self.forloop_range = forloop_range
        self.sources: list[SSAValue] = []
        self._outputs: list[tuple[SSAValue, tuple[int, ...], Attribute | None]] = []

    def new_input(
        self,
        dtensor: SSAValue,
        input_map: Sequence[int],
        forloop_dim: int = -1,
        rank: int | None = None,
        window: Sequence[int] | None = None,
        transpose: Sequence[int] | None = None,
    ) -> SSAValue:
        """The tile of ``dtensor`` each block loads; with ``rank``, the tensor
        viewed with leading size-1 dims up to that rank (the maps count them),
        so a lower-rank tensor's tile broadcasts against higher-rank tiles;
        with ``transpose = (dim0, dim1)``, the tensor with those dims swapped;
        with ``window = (dim, start, end)``, only those elements of ``dim``."""
        if dtensor not in self.sources:
            self.sources.append(dtensor)
            self.block.insert_arg(dtensor.type, len(self.block.args))
        arg = self.block.args[self.sources.index(dtensor)]
        full = t.tensor_shape(dtensor)
        shape = shapes.tile_shape(
            block.input_view(
                full, len(full) if rank is None else rank, transpose, window
            ),
            input_map,
            forloop_dim,
            self.grid_dims,
            self.forloop_range,
        )
        tile = t.result_type_like(dtensor, shape)
        return self._add(
            block.InputOp(arg, input_map, forloop_dim, tile, window, transpose)
        )

    def forloop_accum(
        self, value: SSAValue, reduce: str = "none", shift: SSAValue | None = None
    ) -> SSAValue:
        """Accumulate ``value`` over the for-loop; with ``shift`` (one value per
        row), weight each iteration by ``exp(shift - max over iterations)``,
        the online softmax's rescaling (``block.ACCUM_REDUCTIONS``)."""
        return self._add(block.ForloopAccumOp(value, reduce, shift))

    def new_output(
        self,
        stensor: SSAValue,
        output_map: Sequence[int],
        dtype: Attribute | None = None,
    ) -> None:
        """Save ``stensor`` by ``output_map``; with ``dtype``, the result holds
        that element type (the store converts the fp32 tile)."""
        self.block.add_op(block.OutputOp(stensor, output_map))
        self._outputs.append((stensor, tuple(output_map), dtype))

    def output_types(self) -> list[TensorType]:
        return [
            TensorType(
                dtype or t.element_type(v),
                shapes.stitched_shape(t.tensor_shape(v), omap, self.grid_dims),
            )
            for v, omap, dtype in self._outputs
        ]

    def customized_op(self) -> kernel.CustomizedOp:
        """The finished ``kernel.customized`` op, reading the device tensors
        in the order the graph first used them; the graph must not be used
        afterwards."""
        return kernel.CustomizedOp(
            list(self.sources),
            self.output_types(),
            Region(self.block),
            grid=self.grid_dims,
            block=self.block_dims,
            forloop_range=self.forloop_range,
        )


def lift(value: SSAValue, rank: int) -> tuple[int, ...]:
    """``value``'s shape with leading size-1 dims up to ``rank``: how numpy's
    broadcasting lines it up, and how ``new_input(..., rank=rank)`` reads it."""
    return shapes.lift(t.tensor_shape(value), rank)


def new_kernel_graph(name: str = "main") -> KernelGraph:
    return KernelGraph(name)


def new_threadblock_graph(
    grid_dims: Sequence[int],
    block_dims: Sequence[int] = (128, 1, 1),
    forloop_range: int = 1,
) -> BlockGraph:
    return BlockGraph(grid_dims, block_dims, forloop_range)


__all__ = [
    "BlockGraph",
    "KernelGraph",
    "bfloat16",
    "float16",
    "float32",
    "new_kernel_graph",
    "new_threadblock_graph",
]
