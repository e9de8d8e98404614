"""A lightweight µGraph: plain tuples the search builds by the million.

xDSL operations are too heavy to create for every prefix the generator
explores, so the search works on these frozen dataclasses (hashable, cheap to
pickle to worker processes) and turns only complete, ranked candidates into
IR with :func:`to_module`. Tensors are numbered: a kernel graph's arguments
first, then each op's results in order; inside a block graph, the inputs
first, then each block op's result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Block, Region, SSAValue

from mirage_xdsl.dialects import block as block_dialect
from mirage_xdsl.dialects import shapes, thread
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.builder import BlockGraph as BlockBuilder
from mirage_xdsl.ir.builder import KernelGraph
from mirage_xdsl.search.labels import constant_attrs

Shape = tuple[int, ...]
Attrs = tuple[tuple[str, Any], ...]

THREAD_OPS: dict[str, type[t.TensorOp]] = thread.ELEMENTWISE_OPS
"""The ``thread`` dialect's op class of each kind a thread graph can hold."""
ELEMENTWISE = frozenset(THREAD_OPS)
"""Kinds a thread graph can hold: the element-wise ops of the op table."""


@dataclass(frozen=True, order=True)
class Op:
    """An arithmetic op at the kernel or block level, by ``KIND``."""

    kind: str
    operands: tuple[int, ...]
    attrs: Attrs = ()

    def attr(self, name: str, default: Any = None) -> Any:
        return dict(self.attrs).get(name, default)


@dataclass(frozen=True)
class BlockInput:
    """``block.input``: operand ``source`` of the customized op, tiled."""

    source: int
    imap: tuple[int, int, int]
    fmap: int
    rank: int | None = None
    """The tile's rank when it lifts a lower-rank source (leading size-1
    dims, which the maps count); None: the source's own."""
    window: tuple[int, int, int] | None = None
    """``(dim, start, end)``: the part of the view's ``dim`` it reads."""
    transpose: tuple[int, int] | None = None
    """``(dim0, dim1)``: the source dims it reads swapped."""

    def viewed(self, shape: Shape) -> Shape:
        """The source's shape as the maps index it."""
        rank = len(shape) if self.rank is None else self.rank
        return block_dialect.input_view(shape, rank, self.transpose, self.window)


@dataclass(frozen=True)
class BlockGraph:
    """The block graph of one ``kernel.customized`` op."""

    grid: tuple[int, int, int]
    forloop: int
    inputs: tuple[BlockInput, ...]
    ops: tuple[Op, ...]
    outputs: tuple[tuple[int, tuple[int, int, int]], ...]
    block: tuple[int, int, int] = (128, 1, 1)
    fused: tuple[tuple[int, ...], ...] = ()
    """Groups of op positions lowered as one ``block.thread_graph`` each."""


@dataclass(frozen=True)
class KernelOp:
    """A library kernel op (``graph`` is None) or a ``kernel.customized``."""

    kind: str
    operands: tuple[int, ...]
    attrs: Attrs = ()
    graph: BlockGraph | None = None

    @property
    def n_results(self) -> int:
        return len(self.graph.outputs) if self.graph else 1


@dataclass(frozen=True)
class UGraph:
    """A kernel graph: the function's argument shapes, ops and outputs."""

    name: str
    dtype: str
    inputs: tuple[Shape, ...]
    ops: tuple[KernelOp, ...]
    outputs: tuple[int, ...]
    input_dtypes: tuple[str, ...] = ()
    """Each input's element type where they differ (a program with casts);
    empty: every input is ``dtype``."""

    @property
    def kernels(self) -> int:
        return len(self.ops)


def result_shape(kind: str, operands: Sequence[Shape], attrs: Attrs) -> Shape:
    """Shape of an arithmetic op's result (raises shapes.ShapeError)."""
    a = dict(attrs)
    if kind == "matmul":
        return shapes.matmul(operands[0], operands[1])
    if kind in t.REDUCE_KINDS:
        return shapes.reduce(operands[0], a["dim"])
    if kind == "concat":
        return shapes.concat(operands[0], operands[1], a["dim"])
    if kind == "forloop_accum":
        x = operands[0]
        return x if a["reduction"] == "none" else (*x[:-1], 1)
    if kind == "transpose":
        return shapes.transpose(operands[0], a["dim0"], a["dim1"])
    if kind == "reshape":
        return shapes.reshape(operands[0], a["shape"])
    if kind == "slice":
        return shapes.slice_(operands[0], a["dim"], a["start"], a["end"])
    if kind == "broadcast":
        return shapes.expand(operands[0], a["shape"])
    if len(operands) == 2:
        return shapes.broadcast(operands[0], operands[1])
    return operands[0]


def block_shapes(graph: BlockGraph, sources: Sequence[Shape]) -> list[Shape]:
    """Tile shape of every block tensor, given the customized op's operands."""
    out: list[Shape] = [
        shapes.tile_shape(
            i.viewed(sources[i.source]), i.imap, i.fmap, graph.grid, graph.forloop
        )
        for i in graph.inputs
    ]
    for op in graph.ops:
        out.append(result_shape(op.kind, [out[v] for v in op.operands], op.attrs))
    return out


def kernel_shapes(ug: UGraph) -> list[Shape]:
    """Shape of every kernel tensor of a µGraph."""
    out: list[Shape] = list(ug.inputs)
    for op in ug.ops:
        ins = [out[v] for v in op.operands]
        if op.graph is None:
            out.append(result_shape(op.kind, ins, op.attrs))
            continue
        tiles = block_shapes(op.graph, ins)
        for v, omap in op.graph.outputs:
            out.append(shapes.stitched_shape(tiles[v], omap, op.graph.grid))
    return out


# --- to xDSL IR --------------------------------------------------------------


def _element_type(dtype: str) -> Attribute:
    from mirage_xdsl.ir.builder import bfloat16, float16, float32

    return {"f16": float16, "bf16": bfloat16, "f32": float32}[dtype]


def _apply(builder: Any, op: Op, args: list[SSAValue]) -> SSAValue:
    """Append one arithmetic op with the kernel or block builder."""
    if op.kind in (*t.REDUCE_KINDS, "concat"):
        return getattr(builder, op.kind)(*args, op.attr("dim"))
    if op.kind == "forloop_accum":
        shift = args[1] if len(args) > 1 else None
        return builder.forloop_accum(args[0], op.attr("reduction"), shift)
    if op.kind == "transpose":
        return builder.transpose(args[0], op.attr("dim0"), op.attr("dim1"))
    if op.kind == "reshape":
        return builder.reshape(args[0], op.attr("shape"))
    if op.kind == "slice":
        return builder.slice(args[0], *(op.attr(a) for a in ("dim", "start", "end")))
    if op.kind == "cast":
        return builder.cast(args[0], _element_type(op.attr("dtype")))
    if op.kind == "broadcast":
        return builder.broadcast(args[0], op.attr("shape"))
    return getattr(builder, op.kind)(*args, *constant_args(op))


def constant_args(op: Op) -> list[float]:
    """The float constant an op's builder (or thread op) takes after its
    operands: ``scalar`` or ``eps``; none for other ops."""
    return [value for name, value in op.attrs if name in ("scalar", "eps")]


def _thread_graph(
    bb: BlockBuilder, graph: BlockGraph, group: tuple[int, ...], env: list[SSAValue]
) -> None:
    """Append a ``block.thread_graph`` computing the ops at ``group``."""
    first = len(graph.inputs)
    members = {first + i for i in group}
    external: list[int] = []
    for i in group:
        for v in graph.ops[i].operands:
            if v not in members and v not in external:
                external.append(v)
    used_outside = {
        v
        for j, op in enumerate(graph.ops)
        if first + j not in members
        for v in op.operands
    } | {v for v, _ in graph.outputs}
    results = [first + i for i in group if first + i in used_outside]
    body = Block(arg_types=[env[v].type for v in external])
    local: dict[int, SSAValue] = dict(zip(external, body.args, strict=True))
    for i in group:
        op = graph.ops[i]
        new = THREAD_OPS[op.kind](*[local[v] for v in op.operands], *constant_args(op))
        body.add_op(new)
        local[first + i] = new.results[0]
    body.add_op(thread.YieldOp([local[v] for v in results]))
    tg = block_dialect.ThreadGraphOp(
        [env[v] for v in external], [local[v].type for v in results], Region(body)
    )
    bb.block.add_op(tg)
    for v, r in zip(results, tg.results, strict=True):
        env[v] = r


def _customized(
    kg: KernelGraph, graph: BlockGraph, operands: list[SSAValue]
) -> list[SSAValue]:
    bb = BlockBuilder(graph.grid, graph.block, graph.forloop)
    env: list[SSAValue] = [
        bb.new_input(operands[i.source], i.imap, i.fmap, i.rank, i.window, i.transpose)
        for i in graph.inputs
    ]
    env += [None] * len(graph.ops)  # type: ignore[list-item]
    groups = {g[0]: g for g in graph.fused}
    skip = {i for g in graph.fused for i in g}
    first = len(graph.inputs)
    for i, op in enumerate(graph.ops):
        if i in groups:
            _thread_graph(bb, graph, groups[i], env)
        elif i not in skip:
            env[first + i] = _apply(bb, op, [env[v] for v in op.operands])
    for v, omap in graph.outputs:
        bb.new_output(env[v], omap)
    return kg.customized(
        [operands[s] for s in sorted({i.source for i in graph.inputs})], bb
    )


def to_function(ug: UGraph) -> func.FuncOp:
    kg = KernelGraph(ug.name)
    dtypes = ug.input_dtypes or (ug.dtype,) * len(ug.inputs)
    env: list[SSAValue] = [
        kg.new_input(s, _element_type(d))
        for s, d in zip(ug.inputs, dtypes, strict=True)
    ]
    for op in ug.ops:
        args = [env[v] for v in op.operands]
        if op.graph is None:
            env.append(_apply(kg, Op(op.kind, op.operands, op.attrs), args))
        else:
            env += _customized(kg, op.graph, args)
    for v in ug.outputs:
        kg.mark_output(env[v])
    return kg.function()


def to_module(ug: UGraph) -> ModuleOp:
    """The µGraph as a verified xDSL module with one ``func.func``."""
    module = ModuleOp([to_function(ug)])
    module.verify()
    return module


def from_function(fn: func.FuncOp) -> UGraph:
    """A kernel-level function as a µGraph: library ops and ``kernel.customized``
    ops alike (what the search writes reads back, so a measured candidate can
    be costed again)."""
    from mirage_xdsl.dialects import kernel as kernel_dialect

    index: dict[SSAValue, int] = {a: i for i, a in enumerate(fn.body.block.args)}
    ops: list[KernelOp] = []
    outputs: tuple[int, ...] = ()
    for op in fn.body.block.ops:
        if isinstance(op, func.ReturnOp):
            outputs = tuple(index[v] for v in op.operands)
            continue
        operands = tuple(index[v] for v in op.operands)
        if isinstance(op, kernel_dialect.CustomizedOp):
            ops.append(KernelOp("customized", operands, (), _block_graph(op)))
        elif isinstance(op, t.TensorOp):
            ops.append(KernelOp(op.KIND, operands, _attrs(op)))
        else:
            raise ValueError(f"'{op.name}' is not a kernel-level op")
        for r in op.results:
            index[r] = len(index)
    args = fn.body.block.args
    dtypes = tuple(str(t.element_type(a)) for a in args)
    dtype = dtypes[0] if dtypes else "f16"
    return UGraph(
        fn.sym_name.data,
        dtype,
        tuple(t.tensor_shape(a) for a in args),
        tuple(ops),
        outputs,
        dtypes if len(set(dtypes)) > 1 else (),
    )


def _attrs(op: Any) -> Attrs:
    if op.KIND in (*t.REDUCE_KINDS, "concat"):
        return (("dim", op.dim.value.data),)
    if op.KIND == "forloop_accum":
        return (("reduction", op.reduction),)
    if op.KIND == "transpose":
        return tuple(zip(("dim0", "dim1"), op.dims, strict=True))
    if op.KIND in ("reshape", "broadcast"):
        return (("shape", t.tensor_shape(op.result)),)
    if op.KIND == "slice":
        return tuple(zip(("dim", "start", "end"), op.window, strict=True))
    if op.KIND == "cast":
        return (("dtype", str(t.element_type(op.result))),)
    return constant_attrs(op)


def _block_graph(op: Any) -> BlockGraph:
    """The :class:`BlockGraph` of a ``kernel.customized`` op (thread graphs
    become fused groups of their ops)."""
    body = op.body.block
    sources = {a: i for i, a in enumerate(body.args)}
    env: dict[SSAValue, int] = {}
    inputs: list[BlockInput] = []
    for inner in body.ops:
        if isinstance(inner, block_dialect.InputOp):
            env[inner.results[0]] = len(inputs)
            imap = tuple(inner.imap.get_values())
            rank = len(t.tensor_shape(inner.result))
            lifted = rank if rank != len(t.tensor_shape(inner.source)) else None
            inputs.append(
                BlockInput(
                    sources[inner.source],
                    imap,
                    inner.fmap.value.data,
                    lifted,
                    inner.window_of,
                    inner.swapped_dims,
                )
            )
    ops: list[Op] = []
    fused: list[tuple[int, ...]] = []
    outs: list[tuple[int, tuple[int, int, int]]] = []
    first = len(inputs)

    def add(kind: str, operands: Sequence[SSAValue], attrs: Attrs, local) -> int:
        ops.append(Op(kind, tuple(local[v] for v in operands), attrs))
        return first + len(ops) - 1

    for inner in body.ops:
        if isinstance(inner, block_dialect.InputOp):
            continue
        if isinstance(inner, block_dialect.OutputOp):
            outs.append((env[inner.input], tuple(inner.omap.get_values())))
        elif isinstance(inner, block_dialect.ThreadGraphOp):
            tbody = inner.body.block
            local = {a: env[v] for a, v in zip(tbody.args, inner.inputs, strict=True)}
            group = []
            for top in tbody.ops:
                if isinstance(top, thread.YieldOp):
                    for r, v in zip(inner.results, top.operands, strict=True):
                        env[r] = local[v]
                    continue
                local[top.results[0]] = add(
                    top.KIND, top.operands, constant_attrs(top), local
                )
                group.append(len(ops) - 1)
            fused.append(tuple(group))
        else:
            env[inner.results[0]] = add(inner.KIND, inner.operands, _attrs(inner), env)
    return BlockGraph(
        tuple(op.grid.get_values()),  # type: ignore[arg-type]
        op.forloop_range.value.data,
        tuple(inputs),
        tuple(ops),
        tuple(outs),  # type: ignore[arg-type]
        tuple(op.block.get_values()),  # type: ignore[arg-type]
        tuple(fused),
    )
