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
along the last dim, row norms and reductions over it), whose one result is
read only by customized kernels, directly or through reshapes that keep its
last dim, is removed. Each ``block.input`` that read its result is replaced
by the producer's block graph on the reader's tile, each of the producer's
inputs loaded as its own read relates to the producer's tile (:data:`TILE`,
:data:`ROWS`, :data:`ALONG`, :data:`WHOLE`):

- an input with the result's leading dims is reshaped, as the result was,
  and read with the reader's maps: as the same tile, or as the whole rows of
  the tile's rows where the producer reduced them;
- an input with only ones before its last dim (a ``cos``/``sin`` row, a
  mask, a norm's weight) is read along the tile's last dim, or whole.

Where the producer's blocks hold whole rows and it concatenates, windows or
reduces them, its readers must hold whole rows too: a reader that tiles the
result's last dim (a matmul walking it as the contraction dim in chunks)
keeps the producer. An element-wise producer, or one whose blocks split the
rows and reduce only whole rows read beside their tile (an element-wise op's
default kernel after a row reduction), folds into any plain read, so chains
of default kernels fold one into the next: a softmax written as plain ops is
one kernel. A block that reduces its own part of its rows keeps its kernel,
as do a result the function returns and a cast. A reshape may change the
rank: the folded reductions and concatenations are over the reader's last
dim.

Each reader's block computes the tiles it reads, so tiles read by several
blocks are computed several times: that is why a producer is folded only
where its readers' blocks load at most :data:`MOST_ELEMENTS` elements of its
inputs in all (a decode step's few rows), where recomputing costs less than
a launch. The same loads and reductions made for two reads are made once
(CSE).

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
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import block, kernel, shapes
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.rebuild import RetargetError, make_op, rebuild_op

MOST_ELEMENTS = 1 << 18
"""Most elements of the producer's inputs that the blocks of its readers
load in all (each block its own tile's rows, every for-loop iteration)."""


TILE, ROWS, ALONG, WHOLE = "tile", "rows", "along", "whole"
"""How a reader loads one of the producer's input tiles instead of the
result's tile it read: the same tile of the input (``TILE``); the whole rows
of that tile's rows (``ROWS``: what a row reduction reads); a row of the
input read as the result's tile splits its last dim (``ALONG``: a row that
every row shares, a mask or a norm's weight); the whole input (``WHOLE``)."""


@dataclass(frozen=True)
class _Load:
    """How the readers load one ``block.input`` of the producer's."""

    index: int
    """The operand of the producer it reads."""
    kind: str
    window: tuple[int, int, int] | None


@dataclass(frozen=True)
class _Producer:
    """A producer its readers can compute, and how they load its inputs."""

    op: kernel.CustomizedOp
    loads: tuple[_Load, ...]
    """One per ``block.input`` of its block graph, in order."""
    full: frozenset[int]
    """Its operands with the result's leading dims (the rest have only ones)."""
    rows: bool
    """Whether a reader must hold whole rows (for a concatenation, a window
    or a row reduction of a producer whose blocks hold whole rows)."""


def _row_op(op: Operation, rank: int) -> bool | None:
    """Whether ``op`` (of a producer's block graph) needs whole rows: True for
    a concatenation, reduction or norm along the last dim, False for an
    element-wise op; None for any other op, which no reader computes."""
    if isinstance(op, block.ThreadGraphOp | block.OutputOp):
        return False
    if isinstance(op, t.ConcatBase | t.ReductionOp):
        return True if op.dim.value.data == rank - 1 else None
    if isinstance(op, t.RmsNormBase):
        return True
    if isinstance(op, t.UnaryOp | t.BinaryOp | t.ScalarOp):
        return False
    return None


def _maps(imap: Sequence[int], grid: Sequence[int]) -> tuple[int, ...]:
    """``imap`` with the grid dims of one block left out (each then maps its
    dim whole, as -1 does)."""
    return tuple(-1 if grid[g] == 1 else d for g, d in enumerate(imap))


def _whole_row_reductions(
    producer: kernel.CustomizedOp, kinds: dict[SSAValue, str]
) -> bool:
    """Whether every row reduction or norm of ``producer`` reduces values
    computed from whole rows only (the ``ROWS`` and ``WHOLE`` loads of
    ``kinds``, each ``block.input``'s), not from the blocks' tiles."""
    tiled: set[SSAValue] = {v for v, k in kinds.items() if k in (TILE, ALONG)}
    for op in producer.entry.ops:
        if isinstance(op, block.InputOp):
            continue
        if isinstance(op, t.ReductionOp | t.RmsNormBase) and op.operands[0] in tiled:
            return False
        inner = op.operands
        if isinstance(op, block.ThreadGraphOp):
            inner = op.inputs
        if any(v in tiled for v in inner):
            tiled.update(op.results)
    return True


def _analysed(producer: kernel.CustomizedOp) -> _Producer | None:
    """``producer`` as its readers would compute it, or None if it is not a
    row-local kernel they can compute."""
    if producer.forloop != 1 or len(producer.results) != 1:
        return None
    result = t.tensor_shape(producer.results[0])
    n = len(result)
    outputs = [o for o in producer.entry.ops if isinstance(o, block.OutputOp)]
    if len(outputs) != 1 or n == 0:
        return None
    grid = producer.grid_dims
    omap = _maps(outputs[0].output_map, grid)
    split = [g for g, d in enumerate(omap) if d == n - 1]
    unsplit = tuple(-1 if d == n - 1 else d for d in omap)
    reads = [o for o in producer.entry.ops if isinstance(o, block.InputOp)]
    needs = [_row_op(o, n) for o in producer.entry.ops if o not in reads]
    if None in needs:
        return None
    windows = any(r.window_of is not None for r in reads)
    concat = any(isinstance(o, t.ConcatBase) for o in producer.entry.ops)
    if split and (windows or concat):
        return None
    rows = not split and (any(needs) or windows)
    loads: list[_Load] = []
    kinds: dict[SSAValue, str] = {}
    full: set[int] = set()
    for r in reads:
        shape = t.tensor_shape(r.source)
        if (
            r.swapped_dims is not None
            or r.forloop_dim != -1
            or not shape  # a 0-d operand (a scalar tensor): readers load tiles
            or len(shape) > n
            or len(t.tensor_shape(r.result)) != n
            or (r.window_of is not None and r.window_of[0] != len(shape) - 1)
        ):
            return None
        index = producer.entry.args.index(r.source)  # type: ignore[arg-type]
        imap = _maps(r.input_map, grid)
        lifted = (1,) * (n - len(shape)) + tuple(shape)
        if len(shape) == n and shape[:-1] == result[:-1]:
            full.add(index)
            if imap == omap and not rows and shape[-1] == result[-1]:
                kind = TILE
            elif imap == omap and not split or split and imap == unsplit:
                kind = ROWS
            else:
                return None
        elif all(d == 1 for d in lifted[:-1]):
            if shape[-1] == 1 or (all(e == -1 for e in imap) and (split or rows)):
                kind = WHOLE
            elif imap == tuple(n - 1 if g in split else -1 for g in range(3)):
                kind = ALONG
            else:
                return None
        else:
            return None
        loads.append(_Load(index, kind, r.window_of))
        kinds[r.result] = kind
    if split and not _whole_row_reductions(producer, kinds):
        return None  # a reduction of each block's part of its rows
    return _Producer(producer, tuple(loads), frozenset(full), rows)


@dataclass(frozen=True)
class _Read:
    """A reader of the producer's result: the operand it reads it as."""

    op: kernel.CustomizedOp
    index: int


def _reads(value: SSAValue, last: int, rows: bool, found: list[_Read]) -> bool:
    """Collect the customized kernels reading ``value`` (through reshapes
    that keep its last dim ``last``) into ``found``, each holding whole rows
    where ``rows``; whether every use is one."""
    for use in value.uses:
        user = use.operation
        if isinstance(user, kernel.ReshapeOp):
            if t.tensor_shape(user.result)[-1:] != (last,):
                return False
            if not _reads(user.result, last, rows, found):
                return False
        elif isinstance(user, kernel.CustomizedOp) and _plain(user, use.index, rows):
            found.append(_Read(user, use.index))
        else:
            return False
    return True


def _feeds_a_product_loop(reader: kernel.CustomizedOp) -> bool:
    """Whether ``reader`` multiplies matrices in a for-loop: its ``tl.dot``
    form pipelines the loads that feed the product directly, and a load
    with the producer's arithmetic between it and the product is not
    pipelined. The default attention's second product over 1024 keys (16
    iterations) took 4.0 µs a layer in a decode step reading the normalized
    scores, and 18.9 with the division and its row sums folded in (19.7-20.4
    in every form timed alone; an H200, ``docs/bench/fold_ab_h200.txt``)."""
    return reader.forloop > 1 and any(
        isinstance(o, block.MatmulOp) for o in reader.entry.ops
    )


def _plain(reader: kernel.CustomizedOp, index: int, rows: bool) -> bool:
    """Whether every read of operand ``index`` of ``reader`` is a plain tile
    (no window, transpose or lifted rank), of whole rows where ``rows``, and
    loaded once where the reader's for-loop multiplies matrices
    (:func:`_feeds_a_product_loop`)."""
    arg = reader.entry.args[index]
    rank = len(t.tensor_shape(arg))
    product_loop = _feeds_a_product_loop(reader)
    for use in arg.uses:
        read = use.operation
        if (
            not isinstance(read, block.InputOp)
            or read.window_of is not None
            or read.swapped_dims is not None
            or len(t.tensor_shape(read.result)) != rank
            or (product_loop and read.forloop_dim != -1)
        ):
            return False
        loops = reader.forloop > 1 and read.forloop_dim == rank - 1
        if rows and (rank - 1 in _maps(read.input_map, reader.grid_dims) or loops):
            return False
    return True


def _source_shape(
    producer: _Producer, index: int, leading: Sequence[int]
) -> tuple[int, ...]:
    """The shape a reader whose view of the result has ``leading`` dims reads
    the producer's operand ``index`` as: reshaped as the result was, or with
    only ones before its last dim."""
    last = t.tensor_shape(producer.op.operands[index])[-1]
    if index in producer.full:
        return (*leading, last)
    return (*(1,) * len(leading), last)


def _load(
    load: _Load,
    read: block.InputOp,
    source: Sequence[int],
    grid: Sequence[int],
    forloop: int,
) -> tuple[tuple[int, ...], int, tuple[int, int, int] | None, tuple[int, ...]]:
    """The maps, window and tile with which a reader that loaded ``read`` of
    the result loads ``load`` of an operand of the shape ``source``."""
    n = len(source)
    imap, fmap = tuple(read.input_map), read.forloop_dim
    if load.kind == ROWS:
        imap = tuple(-1 if d == n - 1 else d for d in imap)
        fmap = -1 if fmap == n - 1 else fmap
    elif load.kind == ALONG:
        imap = tuple(d if d == n - 1 else -1 for d in imap)
        fmap = fmap if fmap == n - 1 else -1
    elif load.kind == WHOLE:
        imap, fmap = (-1,) * len(imap), -1
    window = None if load.window is None else (n - 1, *load.window[1:])
    view = block.input_view(source, n, None, window)
    tile = shapes.tile_shape(view, imap, fmap, grid, forloop)
    return imap, fmap, window, tile


def _loaded(producer: _Producer, reader: _Read) -> int:
    """Elements of the producer's inputs that the blocks of ``reader`` load
    in all, computing what they read."""
    op = reader.op
    leading = t.tensor_shape(op.operands[reader.index])[:-1]
    total = 0
    for use in op.entry.args[reader.index].uses:
        read = use.operation
        assert isinstance(read, block.InputOp)
        for load in producer.loads:
            source = _source_shape(producer, load.index, leading)
            _, fmap, _, tile = _load(load, read, source, op.grid_dims, op.forloop)
            loop = op.forloop if fmap != -1 else 1
            total += prod(tile) * prod(op.grid_dims) * loop
    return total


def _as_read(
    value: SSAValue,
    shape: Sequence[int],
    operands: Sequence[SSAValue],
    made: list[Operation],
) -> SSAValue:
    """``value`` reshaped to ``shape``: itself where it has that shape, one
    of the reader's ``operands`` that is that reshape already, or a new
    reshape (added to ``made``)."""
    if t.tensor_shape(value) == tuple(shape):
        return value
    for v in operands:
        owner = v.owner
        if isinstance(owner, kernel.ReshapeOp) and owner.input is value:
            if t.tensor_shape(v) == tuple(shape):
                return v
    reshape = kernel.ReshapeOp(value, tuple(shape))
    made.append(reshape)
    return reshape.result


def _inlined(
    producer: _Producer,
    read: block.InputOp,
    args: dict[int, SSAValue],
    grid: Sequence[int],
    forloop: int,
    body: Block,
) -> SSAValue:
    """Append the producer's block graph to ``body``, computing the tile
    ``read`` loaded; ``args[i]`` is the block argument holding the producer's
    operand ``i`` as reshaped for the reader. Returns the tile."""
    mapping: dict[SSAValue, SSAValue] = {}
    loads = iter(producer.loads)
    for op in producer.op.entry.ops:
        if isinstance(op, block.InputOp):
            load = next(loads)
            source = args[load.index]
            shape = t.tensor_shape(source)
            imap, fmap, window, tile = _load(load, read, shape, grid, forloop)
            new: Operation = block.InputOp(
                source, imap, fmap, t.result_type_like(source, tile), window
            )
        elif isinstance(op, block.OutputOp):
            value = mapping[op.input]
            if value.type != read.result.type:  # a cast stores another type
                raise RetargetError("the producer's tile is not the reader's")
            return value
        elif isinstance(op, t.ReductionOp | t.ConcatBase):  # the last dim
            last = {"dim": IntegerAttr(len(t.tensor_shape(read.result)) - 1, 64)}
            operands = [mapping[v] for v in op.operands]
            new = make_op(type(op), operands, {**op.properties, **last})
        else:
            new = rebuild_op(op, [mapping[v] for v in op.operands])
        body.add_op(new)
        mapping.update(zip(op.results, new.results, strict=True))
    raise AssertionError("a producer has one block.output")


def _fold_into(
    producer: _Producer, reader: _Read, made: list[Operation]
) -> kernel.CustomizedOp:
    """``reader.op`` rebuilt to compute what it read of the producer's
    result; the reshapes of the producer's inputs it reads go to ``made``."""
    op = reader.op
    leading = t.tensor_shape(op.operands[reader.index])[:-1]
    operands = [v for i, v in enumerate(op.operands) if i != reader.index]
    extra: dict[int, SSAValue] = {}
    for index in dict.fromkeys(load.index for load in producer.loads):
        shape = _source_shape(producer, index, leading)
        value = producer.op.operands[index]
        extra[index] = _as_read(value, shape, operands, made)
    kept = len(operands)
    operands += [v for v in dict.fromkeys(extra.values()) if v not in operands]
    body = Block(arg_types=[v.type for v in operands])
    old_args = [a for i, a in enumerate(op.entry.args) if i != reader.index]
    mapping: dict[SSAValue, SSAValue] = dict(
        zip(old_args, body.args[:kept], strict=True)
    )
    new_args = {i: body.args[operands.index(v)] for i, v in extra.items()}
    folded = op.entry.args[reader.index]
    for inner in op.entry.ops:
        operands_of = [mapping[v] for v in inner.operands if v is not folded]
        if isinstance(inner, block.InputOp):
            if inner.source is folded:
                mapping[inner.result] = _inlined(
                    producer, inner, new_args, op.grid_dims, op.forloop, body
                )
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
    cse(body)  # the same load or row reduction made for two reads, once
    result_types = [r.type for r in op.results]
    rebuilt = kernel.CustomizedOp(
        operands, result_types, Region(body), op.grid_dims, op.block_dims, op.forloop
    )
    try:
        rebuilt.verify()
    except VerifyException:
        rebuilt.erase()  # built apart, but reading the function's values
        raise
    return rebuilt


def fold_producer(op: kernel.CustomizedOp) -> bool:
    """Compute ``op``'s result inside every kernel that reads it, and remove
    it; whether it did."""
    producer = _analysed(op)
    if producer is None:
        return False
    result = op.results[0]
    readers: list[_Read] = []
    last = t.tensor_shape(result)[-1]
    if not _reads(result, last, producer.rows, readers) or not readers:
        return False
    if len({id(r.op) for r in readers}) != len(readers):
        return False  # a kernel reading the result twice, as two operands
    made: list[list[Operation]] = [[] for _ in readers]
    rebuilt: list[kernel.CustomizedOp] = []
    try:
        if sum(_loaded(producer, r) for r in readers) > MOST_ELEMENTS:
            return False
        for r, m in zip(readers, made, strict=True):
            rebuilt.append(_fold_into(producer, r, m))
    except (RetargetError, shapes.ShapeError, VerifyException):
        for new in [*rebuilt, *(o for m in made for o in reversed(m))]:
            new.erase()  # built apart, but reading the function's values
        return False
    for reader, new, reshapes in zip(readers, rebuilt, made, strict=True):
        Rewriter.insert_op(reshapes, InsertPoint.before(reader.op))
        Rewriter.replace_op(reader.op, new, new.results)
    _erase_unread(op)
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
