"""Cut a kernel-level function into pieces the search can take one at a time.

The search explores µGraphs of a few library ops; a whole transformer layer
has dozens, and its layout changes (``kernel.transpose``, ``kernel.reshape``)
move elements between index spaces that a block's partition maps cannot
follow. So, as the original project partitions its input into subprograms,
a function is cut into *segments* of arithmetic ops, with the layout ops
between them kept as they are:

- an op's *layout depth* is the most layout ops on any path from the
  function's arguments to it; the arithmetic ops of one depth form one
  segment, searched as a function of its own, and the layout ops of the next
  depth follow it, so every value is made before it is read; a transpose of
  an argument (an ``nn.Linear`` weight) counts for nothing: the loads of its
  readers take it in place, and a norm stays with the projection it feeds;
- a slice or concatenation along the last dim moves elements within rows:
  where the segment it would join is row-local (every op element-wise, a
  row reduction or such a layout op, ``fusion.py``), it counts as an
  arithmetic op and stays inside (:func:`row_layouts`), so a rotary
  embedding's ``rotate_half`` and the products around it are one segment
  and one kernel; elsewhere it cuts like any layout op;
- an *element-wise island* (element-wise ops of one depth that read no
  other arithmetic op of their depth and that only arithmetic ops of later
  depths read, as ``exp(x)`` read by a matmul after a transpose) moves to
  the earliest depth that reads it (:func:`delayed`): it joins its reader's
  segment, one kernel less than a segment of its own;
- a segment is cut before a matmul or row norm that reads a matmul's
  result (except through ``exp``, as attention does): that op runs in a
  later kernel whatever the search does;
- a run longer than ``max_ops`` (the search's space grows steeply with the
  number of ops) is cut only where one matmul's work ends and the next
  begins (:func:`groups`): each piece holds its matmuls with their epilogue
  (a residual add joins the matmul that makes its operand) and the prologue
  of the next matmuls goes with them (a norm joins the matmul reading it).
  A run with no matmul is never cut: element-wise ops and row reductions
  fuse into one kernel however many there are (``fusion.py``).

A segment whose search finds nothing better than its input is cut again
into its :func:`stages` (a prologue apart from the matmuls it feeds) and
those are searched instead.

:func:`stitch` puts the searched segments and the layout ops back together
into one function with the original signature.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType
from xdsl.ir import Block, Operation, Region, SSAValue

from mirage_xdsl.dialects import kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.regions import outside_operands
from mirage_xdsl.search.fusion import ROW_LAYOUT_KINDS, row_fused
from mirage_xdsl.search.optimizer import optimize
from mirage_xdsl.search.prologue import reads_argument
from mirage_xdsl.search.ugraph import from_function


@dataclass
class Segment:
    """A run of arithmetic ops: its own function, and how it plugs back in."""

    function: func.FuncOp
    inputs: list[SSAValue]
    """The values of the original function that the segment's arguments hold."""
    outputs: list[SSAValue]
    """The values of the original function that the segment's results give."""


Piece = Segment | Operation
"""A segment to search, or a layout op kept as it is."""


def is_layout(op: Operation, inside: frozenset[Operation] = frozenset()) -> bool:
    """A layout op, or a collective (``kernel.all_reduce``, a kernel boundary
    of a tensor-parallel program): kept as it is between segments, unless
    it is one of ``inside`` (:func:`row_layouts`)."""
    if op in inside:
        return False
    return isinstance(op, kernel.AllReduceOp) or (
        isinstance(op, t.TensorOp) and op.KIND in t.LAYOUT_KINDS
    )


def along_rows(op: Operation) -> bool:
    """A slice or concatenation along its operands' last dim: it moves
    elements within rows only."""
    return (
        isinstance(op, t.TensorOp)
        and op.KIND in ROW_LAYOUT_KINDS
        and op.dim.value.data == len(t.tensor_shape(op.operands[0])) - 1  # type: ignore[attr-defined]
    )


def needs_partition(fn: func.FuncOp, max_ops: int) -> bool:
    """Whether ``fn`` holds a layout op that cuts (not one of its
    :func:`row_layouts`) or more arithmetic ops than one search takes."""
    ops = _body(fn)
    inside = row_layouts(ops, _returned(fn), max_ops)
    return any(is_layout(op, inside) for op in ops) or len(ops) > max_ops


def _body(fn: func.FuncOp) -> list[Operation]:
    return [op for op in fn.body.block.ops if not isinstance(op, func.ReturnOp)]


def _returned(fn: func.FuncOp) -> set[SSAValue]:
    return set(fn.body.block.last_op.operands)  # type: ignore[union-attr]


def layout_depths(
    ops: Sequence[Operation], inside: frozenset[Operation] = frozenset()
) -> dict[Operation, int]:
    """Each op's layout depth (a layout op counts itself, unless it is one
    of ``inside`` or a transpose of an argument, ``prologue.reads_argument``:
    that cuts nothing, and is kept in front of the segments of depth 0)."""
    made: dict[SSAValue, int] = {}
    depth: dict[Operation, int] = {}
    for op in ops:
        d = max((made.get(v, 0) for v in op.operands), default=0)
        d += 1 if is_layout(op, inside) and not reads_argument(op) else 0
        depth[op] = d
        for r in op.results:
            made[r] = d
    return depth


def row_layouts(
    ops: Sequence[Operation], returned: set[SSAValue], max_ops: int
) -> frozenset[Operation]:
    """The slices and concatenations along the last dim (:func:`along_rows`)
    that stay inside a segment: each whose segment, with it inside, is
    row-local (``fusion.row_fused`` builds it as kernels of whole rows that
    fit shared memory). Every such op starts inside; a slice no op of its
    segment reads is taken out, and of a segment that is not row-local (it holds a
    matmul, or a slice of part of a norm's row), the first of them (those no
    other one feeds), and so on until every segment holding one is
    row-local: the slices of a matmul's result cut, a concatenation of what
    they feed stays with the row-local ops after them."""
    inside = frozenset(op for op in ops if along_rows(op))
    while inside:
        cut: set[Operation] = set()
        for _, found in _by_depth(ops, returned, inside, max_ops):
            for run in found:
                held = inside.intersection(run)
                idle = _idle(run, held)
                if idle:
                    cut |= idle
                elif held and not _row_fusible(run, returned):
                    cut |= _first(run, held)
        if not cut:
            break
        inside -= cut
    return inside


def _idle(run: list[Operation], held: frozenset[Operation]) -> set[Operation]:
    """The slices of ``held`` that no op of ``run`` reads: inside, one would
    be a copy the kernel writes; outside, it is a view of its operand or a
    window its readers read in place (``fold-slices``)."""
    members = set(run)
    return {
        op
        for op in held
        if getattr(op, "KIND", None) == "slice"
        and not any(u.operation in members for r in op.results for u in r.uses)
    }


def _first(run: list[Operation], held: frozenset[Operation]) -> set[Operation]:
    """The ops of ``held`` that no op of ``held`` feeds within ``run`` (in
    program order)."""
    fed: set[Operation] = set()
    for op in run:
        if any(v.owner in fed or v.owner in held for v in op.operands):
            fed.add(op)
    return set(held) - fed


def _by_depth(
    ops: Sequence[Operation],
    returned: set[SSAValue],
    inside: frozenset[Operation],
    max_ops: int,
) -> list[tuple[list[Operation], list[list[Operation]]]]:
    """Per depth in turn: its layout ops (those not ``inside``), then its
    runs of arithmetic ops (``inside`` layout ops among them), the segments
    before any is cut into stages."""
    depth = delayed(ops, layout_depths(ops, inside), returned, inside)
    out = []
    for d in range(max(depth.values(), default=0) + 1):
        at = [op for op in ops if depth[op] == d]
        layouts = [op for op in at if is_layout(op, inside)]
        arithmetic = [op for op in at if not is_layout(op, inside)]
        out.append((layouts, runs(arithmetic, max_ops)))
    return out


def _row_fusible(ops: list[Operation], returned: set[SSAValue]) -> bool:
    """Whether ``ops``, as a function of what they read from outside
    returning what is read after them or returned, has a row-fused build
    that fits shared memory (a default build the search can pick)."""
    members = set(ops)
    outputs = [
        r
        for op in ops
        for r in op.results
        if r in returned or any(u.operation not in members for u in r.uses)
    ]
    fused = row_fused(from_function(_segment("rows", ops, outputs).function))
    return fused is not None and optimize(fused) is not None


ELEMENTWISE_KINDS = frozenset(
    (*t.ELEMENTWISE_UNARY_KINDS, *t.BINARY_KINDS, *t.SCALAR_KINDS)
)


def delayed(
    ops: Sequence[Operation],
    depth: dict[Operation, int],
    returned: set[SSAValue],
    inside: frozenset[Operation] = frozenset(),
) -> dict[Operation, int]:
    """``depth`` with each element-wise island moved to the earliest depth of
    its readers, the latest depths first (so an island feeding a moved one
    moves with it). An island is a connected set of arithmetic ops of one
    depth, all element-wise, none returned, read outside the set only by
    arithmetic ops of later depths (``inside`` layout ops count as
    arithmetic ones)."""
    depth = dict(depth)
    for d in sorted({depth[op] for op in ops}, reverse=True):
        for island in _islands([op for op in ops if depth[op] == d], inside):
            readers = {
                u.operation
                for op in island
                for r in op.results
                for u in r.uses
                if u.operation not in island
            }
            movable = (
                readers
                and all(getattr(op, "KIND", None) in ELEMENTWISE_KINDS for op in island)
                and not any(r in returned for op in island for r in op.results)
                and all(u in depth and not is_layout(u, inside) for u in readers)
            )
            if movable and min(depth[u] for u in readers) > d:
                for op in island:
                    depth[op] = min(depth[u] for u in readers)
    return depth


def _islands(
    ops: Sequence[Operation], inside: frozenset[Operation]
) -> list[set[Operation]]:
    """The connected sets of the arithmetic ops of ``ops`` (all of one depth),
    joined by the values they make and read."""
    members = [op for op in ops if not is_layout(op, inside)]
    island = {op: {op} for op in members}
    for op in members:
        for v in op.operands:
            owner = v.owner
            if isinstance(owner, Operation) and owner in island:
                if island[owner] is not island[op]:
                    merged = island[owner] | island[op]
                    for m in merged:
                        island[m] = merged
    unique = {id(s): s for s in island.values()}
    return list(unique.values())


def runs(ops: Sequence[Operation], max_ops: int) -> list[list[Operation]]:
    """``ops`` in program order, cut before a matmul of a matmul's result
    (:func:`chained`), then a run longer than ``max_ops`` into its
    :func:`groups`."""
    out: list[list[Operation]] = []
    for run in chained(ops):
        out += groups(run) if len(run) > max_ops else [list(run)]
    return out


def groups(ops: Sequence[Operation]) -> list[list[Operation]]:
    """Runs of ``ops`` in program order, a new one started, once the run has
    a matmul, at an op that reads nothing its matmuls made and is no sibling
    matmul (one sharing an operand with them, as the gated MLP's two do):
    the run keeps its matmuls' epilogue, and the next matmuls get their
    prologue. A run with no matmul is one group."""
    out: list[list[Operation]] = [[]]
    after: set[SSAValue] = set()
    """Values of the current group that depend on one of its matmuls."""
    read: set[SSAValue] = set()
    """Operands of the current group's matmuls."""
    for op in ops:
        matmul = getattr(op, "KIND", None) == "matmul"
        epilogue = any(v in after for v in op.operands)
        sibling = matmul and any(v in read for v in op.operands)
        if after and not epilogue and not sibling:
            out.append([])
            after, read = set(), set()
        out[-1].append(op)
        if matmul:
            read.update(op.operands)
        if matmul or epilogue:
            after.update(op.results)
    return out


WHOLE_ROW_KINDS = ("matmul", "rms_norm")
"""Ops that read whole rows of their operand (a contraction, a row norm)."""


def chained(ops: Sequence[Operation]) -> list[list[Operation]]:
    """Runs of ``ops`` in program order, a new one started at each matmul or
    row norm that reads, within the run, the result of a matmul through
    anything but an ``exp``.

    A matmul's row is complete only once its whole contraction is done, so an
    op reading whole rows of it (another matmul, a norm) runs in a later
    kernel whatever the search does, and a segment holding both only makes
    the search longer. Attention is the exception the search fuses: the
    second contraction sums over the first one's columns, under ``exp``
    (FlashAttention's for-loop).
    """
    out: list[list[Operation]] = []
    after: dict[SSAValue, bool] = {}
    """Values of the current run that follow a matmul with no exp between."""
    for op in ops:
        kind = getattr(op, "KIND", None)
        whole_rows = kind in WHOLE_ROW_KINDS
        if out and whole_rows and any(after.get(v) for v in op.operands):
            out.append([])
            after = {}
        if not out:
            out.append([])
        out[-1].append(op)
        follows = kind == "matmul" or (
            kind != "exp" and any(after.get(v) for v in op.operands)
        )
        for r in op.results:
            after[r] = follows
    return out


def stages(ops: Sequence[Operation]) -> list[list[Operation]]:
    """Runs of ``ops`` in program order, a new one started at each matmul that
    reads, within the run, a value no matmul made: a prologue (a norm and its
    weight) apart from the matmuls it feeds.

    Fusing a prologue into its matmuls is worth the most but needs the most
    ops in one kernel (a norm over the whole contraction, carried through the
    for-loop); where the search finds no such form, the stages on their own
    still fuse (the prologue into one kernel, the matmuls with their
    epilogue into another)."""
    out: list[list[Operation]] = []
    made: dict[SSAValue, bool] = {}
    """Values of the current run, and whether a matmul made them."""
    for op in ops:
        kind = getattr(op, "KIND", None)
        prologue = [v for v in op.operands if v in made and not made[v]]
        if out and kind == "matmul" and prologue:
            out.append([])
            made = {}
        if not out:
            out.append([])
        out[-1].append(op)
        for r in op.results:
            made[r] = kind == "matmul" or any(made.get(v) for v in op.operands)
    return out


def partition(fn: func.FuncOp, max_ops: int, by_stage: bool = False) -> list[Piece]:
    """The pieces of ``fn`` in an order that defines every value before use;
    with ``by_stage``, each run is cut into its :func:`stages` as well."""
    ops = _body(fn)
    returned = _returned(fn)
    inside = row_layouts(ops, returned, max_ops)
    pieces: list[Piece] = []
    groups: list[list[Operation]] = []
    for layouts, found in _by_depth(ops, returned, inside, max_ops):
        pieces += layouts
        for run in found:
            for stage in stages(run) if by_stage else [run]:
                groups.append(stage)
                pieces.append(len(groups) - 1)  # type: ignore[arg-type]
    users: dict[SSAValue, set[int]] = {}
    for i, piece in enumerate(pieces):
        members = groups[piece] if isinstance(piece, int) else [piece]
        for op in members:
            for v in op.operands:
                users.setdefault(v, set()).add(i)
    out: list[Piece] = []
    for i, piece in enumerate(pieces):
        if not isinstance(piece, int):
            out.append(piece)
            continue
        outputs = [
            r
            for op in groups[piece]
            for r in op.results
            if r in returned or users.get(r, set()) - {i}
        ]
        name = f"{fn.sym_name.data}_s{piece}"
        out.append(_segment(name, groups[piece], outputs))
    return out


def _segment(name: str, ops: list[Operation], outputs: list[SSAValue]) -> Segment:
    """The function computing ``ops``: arguments for what they read from
    outside, results ``outputs``."""
    inputs = outside_operands(ops)
    body = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args, strict=True))
    for op in ops:
        clone = op.clone(value_mapper=mapping)
        body.add_op(clone)
        mapping.update(zip(op.results, clone.results, strict=True))
    body.add_op(func.ReturnOp(*[mapping[v] for v in outputs]))
    function = func.FuncOp(
        name,
        FunctionType.from_lists([v.type for v in inputs], [v.type for v in outputs]),
        Region(body),
    )
    return Segment(function, inputs, outputs)


def stitch(
    fn: func.FuncOp, pieces: Sequence[Piece], found: Sequence[func.FuncOp]
) -> func.FuncOp:
    """``fn`` rebuilt from its pieces, each segment replaced by its searched
    function ``found[i]`` (in the order the segments appear)."""
    body = Block(arg_types=fn.function_type.inputs.data)
    mapping: dict[SSAValue, SSAValue] = dict(
        zip(fn.body.block.args, body.args, strict=True)
    )
    searched = iter(found)
    for piece in pieces:
        if isinstance(piece, Operation):
            clone = piece.clone(value_mapper=mapping)
            body.add_op(clone)
            mapping.update(zip(piece.results, clone.results, strict=True))
            continue
        result = next(searched)
        inner: dict[SSAValue, SSAValue] = {
            a: mapping[v]
            for a, v in zip(result.body.block.args, piece.inputs, strict=True)
        }
        for op in result.body.block.ops:
            if isinstance(op, func.ReturnOp):
                for v, ret in zip(piece.outputs, op.operands, strict=True):
                    mapping[v] = inner[ret]
                continue
            clone = op.clone(value_mapper=inner)
            body.add_op(clone)
            inner.update(zip(op.results, clone.results, strict=True))
    ret = fn.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    body.add_op(func.ReturnOp(*[mapping[v] for v in ret.operands]))
    return func.FuncOp(fn.sym_name.data, fn.function_type, Region(body))
