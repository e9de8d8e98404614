"""``fold-producers``: a small row-local kernel computed inside its readers.

A decode layer's rotary embedding of its queries is a kernel of its own: the
search takes it as a segment apart from the attention it feeds, since the
reshape between them (``[1, 14, 1, 64]`` heads to ``[1, 2, 7, 64]``, seven
query heads a key head) is a layout op, and segments are cut at layout ops
(``search/partition.py``). The kernel reads 1.75 KB and writes as much, and
costs a launch, about a microsecond. The attention's blocks could compute the
same rows from the unrotated queries as they load them.

This pass does that: a *producer*, a ``kernel.customized`` op with no
for-loop whose block graph is row-local (element-wise ops, concatenations
along the last dim, row norms and reductions over it; every input read whole
or through a window of its last dim, each block owning whole rows), whose one
result is read only by customized kernels, directly or through reshapes that
keep its last dim, is removed. Each ``block.input`` that read its result is
replaced by the producer's block graph on the reader's tile:

- an input of the producer with the result's leading dims is reshaped, as
  the result was, and read with the reader's maps (and the producer's window
  of the last dim): the reader's tile of it holds exactly the rows of the
  reader's tile of the result;
- an input whose leading dims are all one, or that has only the last dim (a
  ``cos``/``sin`` row, a norm's weight), is read whole, replicated across the
  reader's grid, and broadcasts against those rows as it did against the
  producer's.

Each reader's block computes the rows it reads, so rows read by several
blocks are computed several times: that is why a producer is folded only
where its readers' blocks load at most :data:`MOST_ELEMENTS` elements of its
inputs in all (a decode step's few rows), where recomputing costs less than
a launch. A reader that tiles the result's last
dim (a matmul walking it as the contraction dim in chunks) does not have
whole rows, and keeps the producer, as does a result the function returns.

Like ``fold-slices``, only the Triton backend runs the pass
(``lowering/triton.py``); the values the readers compute are those the
producer stored, in fp32 registers rather than rounded to the result's type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import block, kernel, shapes
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.rebuild import RetargetError, rebuild_op

MOST_ELEMENTS = 1 << 18
"""Most elements of the producer's inputs that the blocks of its readers
load in all (each block its own tile's rows, every for-loop iteration)."""


@dataclass(frozen=True)
class _Source:
    """An operand of the producer, as its readers read it instead."""

    index: int
    """The operand's position among the producer's operands."""
    broadcast: bool
    """Whether its leading dims are all one (read whole by every block)."""


@dataclass(frozen=True)
class _Read:
    """A reader of the producer's result: the operand it reads it as."""

    op: kernel.CustomizedOp
    index: int


def _last_dim_only(window: tuple[int, int, int] | None, rank: int) -> bool:
    return window is None or window[0] == rank - 1


def _row_local_op(op: Operation, rank: int) -> bool:
    """Whether ``op`` (of a producer's block graph) computes each row of its
    result from the same rows of its operands."""
    if isinstance(op, block.ThreadGraphOp | block.OutputOp):
        return True
    if isinstance(op, t.ConcatBase):
        return op.dim.value.data == rank - 1
    if isinstance(op, t.ReductionOp):
        return op.dim.value.data == rank - 1
    return isinstance(op, t.UnaryOp | t.BinaryOp | t.ScalarOp | t.RmsNormBase)


def _sources(producer: kernel.CustomizedOp) -> list[_Source] | None:
    """How each operand of ``producer`` is read, or None if the producer is
    not a row-local kernel its readers can compute."""
    if producer.forloop != 1 or len(producer.results) != 1:
        return None
    result = t.tensor_shape(producer.results[0])
    rank = len(result)
    outputs = [o for o in producer.entry.ops if isinstance(o, block.OutputOp)]
    if len(outputs) != 1 or rank - 1 in outputs[0].output_map:
        return None
    omap = tuple(outputs[0].output_map)
    kinds: dict[int, bool] = {}
    for op in producer.entry.ops:
        if not isinstance(op, block.InputOp):
            if not _row_local_op(op, rank):
                return None
            continue
        index = producer.entry.args.index(op.source)  # type: ignore[arg-type]
        shape = t.tensor_shape(op.source)
        if (
            op.swapped_dims is not None
            or op.forloop_dim != -1
            or len(shape) > rank
            or len(t.tensor_shape(op.result)) != rank
            or not _last_dim_only(op.window_of, len(shape))
        ):
            return None
        if shape[:-1] == result[:-1] and tuple(op.input_map) == omap:
            broadcast = False
        elif all(d == 1 for d in shape[:-1]):  # a lower rank lifts with ones
            broadcast = True
        else:
            return None
        if kinds.setdefault(index, broadcast) != broadcast:
            return None
    return [_Source(i, b) for i, b in sorted(kinds.items())]


def _reads(value: SSAValue, last: int, found: list[_Read]) -> bool:
    """Collect the customized kernels reading ``value`` (through reshapes
    that keep its last dim ``last``) into ``found``; whether every use is one."""
    for use in value.uses:
        user = use.operation
        if isinstance(user, kernel.ReshapeOp):
            if t.tensor_shape(user.result)[-1] != last:
                return False
            if not _reads(user.result, last, found):
                return False
        elif isinstance(user, kernel.CustomizedOp) and _whole_rows(user, use.index):
            found.append(_Read(user, use.index))
        else:
            return False
    return True


def _whole_rows(reader: kernel.CustomizedOp, index: int) -> bool:
    """Whether every read of operand ``index`` of ``reader`` is a plain tile
    of whole rows (no window, transpose, lifted rank or split last dim)."""
    arg = reader.entry.args[index]
    rank = len(t.tensor_shape(arg))
    for use in arg.uses:
        read = use.operation
        if (
            not isinstance(read, block.InputOp)
            or read.window_of is not None
            or read.swapped_dims is not None
            or len(t.tensor_shape(read.result)) != rank
            or rank - 1 in read.input_map
            or read.forloop_dim == rank - 1
        ):
            return False
    return True


def _rows_read(reader: _Read) -> int:
    """Rows of the producer's result the blocks of ``reader`` load in all."""
    op = reader.op
    rows = 0
    for use in op.entry.args[reader.index].uses:
        read = use.operation
        assert isinstance(read, block.InputOp)
        tile = t.tensor_shape(read.result)
        loop = op.forloop if read.forloop_dim != -1 else 1
        rows += prod(tile[:-1]) * prod(op.grid_dims) * loop
    return rows


def _row_elements(producer: kernel.CustomizedOp, sources: list[_Source]) -> int:
    """Elements of one row of each of the producer's inputs, in all."""
    return sum(
        t.tensor_shape(producer.operands[s.index])[-1]
        for s in sources
        if not s.broadcast
    )


def _as_read(
    value: SSAValue,
    leading: Sequence[int],
    operands: Sequence[SSAValue],
    made: list[Operation],
) -> SSAValue:
    """``value`` reshaped to ``leading`` plus its own last dim: itself where
    it has that shape, one of the reader's ``operands`` that is that reshape
    already, or a new reshape (added to ``made``)."""
    shape = (*leading, t.tensor_shape(value)[-1])
    if t.tensor_shape(value) == shape:
        return value
    for v in operands:
        owner = v.owner
        if isinstance(owner, kernel.ReshapeOp) and owner.input is value:
            if t.tensor_shape(v) == shape:
                return v
    reshape = kernel.ReshapeOp(value, shape)
    made.append(reshape)
    return reshape.result


def _inlined(
    producer: kernel.CustomizedOp,
    read: block.InputOp,
    args: dict[int, SSAValue],
    sources: dict[int, _Source],
    grid: Sequence[int],
    forloop: int,
    body: Block,
) -> SSAValue:
    """Append the producer's block graph to ``body``, computing the tile
    ``read`` loaded; ``args[i]`` is the block argument holding the producer's
    operand ``i`` as reshaped for the reader. Returns the tile."""
    rank = len(t.tensor_shape(read.result))
    mapping: dict[SSAValue, SSAValue] = {}
    for op in producer.entry.ops:
        if isinstance(op, block.InputOp):
            index = producer.entry.args.index(op.source)  # type: ignore[arg-type]
            source = args[index]
            window = op.window_of
            if window is not None:
                window = (rank - 1, window[1], window[2])
            broadcast = sources[index].broadcast
            imap = (-1,) * len(read.input_map) if broadcast else read.input_map
            fmap = -1 if broadcast else read.forloop_dim
            view = block.input_view(t.tensor_shape(source), rank, None, window)
            tile = shapes.tile_shape(view, imap, fmap, grid, forloop)
            new: Operation = block.InputOp(
                source, imap, fmap, t.result_type_like(source, tile), window
            )
        elif isinstance(op, block.OutputOp):
            value = mapping[op.input]
            if value.type != read.result.type:  # a cast stores another type
                raise RetargetError("the producer's tile is not the reader's")
            return value
        else:
            new = rebuild_op(op, [mapping[v] for v in op.operands])
        body.add_op(new)
        mapping.update(zip(op.results, new.results, strict=True))
    raise AssertionError("a producer has one block.output")


def _fold_into(
    producer: kernel.CustomizedOp,
    sources: list[_Source],
    reader: _Read,
    made: list[Operation],
) -> kernel.CustomizedOp:
    """``reader.op`` rebuilt to compute what it read of the producer's
    result; the reshapes of the producer's inputs it reads go to ``made``."""
    op = reader.op
    read_shape = t.tensor_shape(op.operands[reader.index])
    operands = [v for i, v in enumerate(op.operands) if i != reader.index]
    extra: dict[int, SSAValue] = {}
    for s in sources:
        value = producer.operands[s.index]
        leading = (1,) * (len(read_shape) - 1) if s.broadcast else read_shape[:-1]
        extra[s.index] = _as_read(value, leading, operands, made)
    kept = len(operands)
    operands += [v for v in dict.fromkeys(extra.values()) if v not in operands]
    body = Block(arg_types=[v.type for v in operands])
    old_args = [a for i, a in enumerate(op.entry.args) if i != reader.index]
    mapping: dict[SSAValue, SSAValue] = dict(
        zip(old_args, body.args[:kept], strict=True)
    )
    new_args = {i: body.args[operands.index(v)] for i, v in extra.items()}
    by_index = {s.index: s for s in sources}
    folded = op.entry.args[reader.index]
    for inner in op.entry.ops:
        operands_of = [mapping[v] for v in inner.operands if v is not folded]
        if isinstance(inner, block.InputOp):
            if inner.source is folded:
                tile = _inlined(
                    producer,
                    inner,
                    new_args,
                    by_index,
                    op.grid_dims,
                    op.forloop,
                    body,
                )
                mapping[inner.result] = tile
                continue
            new: Operation = block.InputOp(
                operands_of[0],
                inner.input_map,
                inner.forloop_dim,
                inner.result.type,  # type: ignore[arg-type]
                inner.window_of,
                inner.swapped_dims,
            )
        else:
            new = rebuild_op(inner, operands_of)
        body.add_op(new)
        mapping.update(zip(inner.results, new.results, strict=True))
    result_types = [r.type for r in op.results]
    rebuilt = kernel.CustomizedOp(
        operands, result_types, Region(body), op.grid_dims, op.block_dims, op.forloop
    )
    rebuilt.verify()
    return rebuilt


def fold_producer(producer: kernel.CustomizedOp) -> bool:
    """Compute ``producer``'s result inside every kernel that reads it, and
    remove it; whether it did."""
    sources = _sources(producer)
    if sources is None:
        return False
    result = producer.results[0]
    shape = t.tensor_shape(result)
    readers: list[_Read] = []
    if not _reads(result, shape[-1], readers) or not readers:
        return False
    if len({id(r.op) for r in readers}) != len(readers):
        return False  # a kernel reading the result twice, as two operands
    rows = sum(_rows_read(r) for r in readers)
    if rows * _row_elements(producer, sources) > MOST_ELEMENTS:
        return False
    made: list[list[Operation]] = [[] for _ in readers]
    try:
        rebuilt = [
            _fold_into(producer, sources, r, m)
            for r, m in zip(readers, made, strict=True)
        ]
    except (RetargetError, shapes.ShapeError, VerifyException):
        return False
    for reader, new, reshapes in zip(readers, rebuilt, made, strict=True):
        Rewriter.insert_op(reshapes, InsertPoint.before(reader.op))
        Rewriter.replace_op(reader.op, new, new.results)
    _erase_unread(producer)
    return True


def _erase_unread(op: Operation) -> None:
    """Erase ``op`` and the reshapes of its result, none of them read now."""
    for r in op.results:
        for use in list(r.uses):
            _erase_unread(use.operation)
    Rewriter.erase_op(op)


@dataclass(frozen=True)
class FoldProducersPass(ModulePass):
    """Remove each small row-local customized kernel whose result only
    customized kernels read (through reshapes that keep its last dim): each
    reader computes the rows it reads itself."""

    name = "fold-producers"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in [o for o in op.walk() if isinstance(o, func.FuncOp)]:
            changed = True
            while changed:  # a reader rebuilt may be a producer in turn
                changed = False
                for inner in list(fn.body.block.ops):
                    if isinstance(inner, kernel.CustomizedOp) and inner.parent:
                        changed |= fold_producer(inner)


__all__ = ["MOST_ELEMENTS", "FoldProducersPass", "fold_producer"]
