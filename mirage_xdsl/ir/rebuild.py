"""Rebuild a µGraph for new input shapes.

A µGraph found for one shape often works for others: GQA found at batch 1 is
the same µGraph at batch 8 with eight times as many blocks along the batch grid
dim. ``retarget`` rebuilds a function for new input types: every op is
re-created from its new operands (result types are re-inferred by the op
constructors), and each ``kernel.customized`` op scales its grid (or, failing
that, its for-loop range) so that per-block tiles keep their shape. The caller
must still check the result (verifier and equivalence): retargeting proposes,
it does not prove.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from mirage_xdsl.dialects import block, kernel, shapes, thread
from mirage_xdsl.dialects import tensor_ops as t


class RetargetError(ValueError):
    """The µGraph cannot be rebuilt for the requested shapes."""


def make_op(
    cls: type[Operation], operands: Sequence[SSAValue], props: dict[str, Attribute]
) -> Operation:
    """Build an arithmetic op of class ``cls``; result types follow from operands."""
    try:
        if issubclass(cls, t.ReductionOp):
            return cls(operands[0], props["dim"].value.data)  # type: ignore[attr-defined]
        if issubclass(cls, t.ConcatBase):
            return cls(operands[0], operands[1], props["dim"].value.data)  # type: ignore[attr-defined]
        if issubclass(cls, t.UnaryOp):
            return cls(operands[0])
        if issubclass(cls, t.ScalarOp):
            return cls(operands[0], props["scalar"].value.data)  # type: ignore[attr-defined]
        if issubclass(cls, t.RmsNormBase):
            eps = props.get("eps")
            return cls(operands[0], eps.value.data if eps else 0.0)  # type: ignore[attr-defined]
        if issubclass(cls, t.BinaryOp | t.MatmulBase):
            return cls(operands[0], operands[1])
    except shapes.ShapeError as e:
        raise RetargetError(f"'{cls.name}': {e}") from None
    raise RetargetError(f"cannot build '{cls.name}'")


def rebuild_op(op: Operation, operands: Sequence[SSAValue]) -> Operation:
    """Re-create ``op`` on new operands; result types follow from the operands."""
    if isinstance(op, t.TensorOp):
        return make_op(type(op), operands, dict(op.properties))
    if isinstance(op, block.ForloopAccumOp):
        shift = operands[1] if len(operands) > 1 else None
        return block.ForloopAccumOp(operands[0], op.reduction, shift)
    if isinstance(op, block.OutputOp):
        return block.OutputOp(operands[0], op.output_map)
    if isinstance(op, thread.YieldOp):
        return thread.YieldOp(operands)
    if isinstance(op, block.ThreadGraphOp):
        return rebuild_thread_graph(op, operands)
    if isinstance(op, func.ReturnOp):
        return func.ReturnOp(*operands)
    raise RetargetError(f"cannot rebuild '{op.name}'")


def rebuild_block(
    old: Block, arg_types: Sequence[Attribute], special=None
) -> tuple[Block, dict[SSAValue, SSAValue]]:
    """Rebuild every op of ``old`` into a new block with ``arg_types`` arguments.

    ``special(op, operands)`` may return a replacement for ops it handles.
    """
    new = Block(arg_types=list(arg_types))
    mapping: dict[SSAValue, SSAValue] = dict(zip(old.args, new.args, strict=True))
    for op in old.ops:
        operands = [mapping[v] for v in op.operands]
        rebuilt = (special and special(op, operands)) or rebuild_op(op, operands)
        new.add_op(rebuilt)
        mapping.update(zip(op.results, rebuilt.results, strict=True))
    return new, mapping


def rebuild_thread_graph(
    op: block.ThreadGraphOp, operands: Sequence[SSAValue]
) -> block.ThreadGraphOp:
    body, _ = rebuild_block(op.entry, [v.type for v in operands])
    yielded = body.last_op
    assert yielded is not None
    return block.ThreadGraphOp(
        operands, [v.type for v in yielded.operands], Region(body)
    )


def _ratio(new: int, old: int) -> Fraction:
    return Fraction(new, old)


def scaled_partition(
    op: kernel.CustomizedOp, arg_types: Sequence[TensorType]
) -> tuple[tuple[int, int, int], int]:
    """Grid and for-loop range that keep ``op``'s tiles for new input shapes.

    A grid dim scales with the tensor dims it splits; a dim split only by the
    for-loop scales the for-loop range. Dims split by neither change the
    tile. Conflicting or fractional scalings leave the partition unchanged
    when that still divides, and otherwise fail.
    """
    grid = list(op.grid_dims)
    grid_ratio: dict[int, set[Fraction]] = {}
    loop_ratio: set[Fraction] = set()
    for inner in op.entry.ops:
        if not isinstance(inner, block.InputOp):
            continue
        index = op.entry.args.index(inner.source)  # type: ignore[arg-type]
        old = t.tensor_shape(inner.source)
        new = tuple(arg_types[index].get_shape())
        if len(old) != len(new):
            raise RetargetError("input rank changed")
        if inner.swapped_dims is not None:  # the maps count the transposed view
            old, new = (shapes.transpose(s, *inner.swapped_dims) for s in (old, new))
        for g, d in enumerate(inner.input_map):
            if d != -1:
                grid_ratio.setdefault(g, set()).add(_ratio(new[d], old[d]))
        fmap = inner.forloop_dim
        if fmap != -1 and fmap not in inner.input_map:
            loop_ratio.add(_ratio(new[fmap], old[fmap]))
    for g, ratios in grid_ratio.items():
        scaled = grid[g] * next(iter(ratios))
        if len(ratios) == 1 and scaled.denominator == 1 and scaled >= 1:
            grid[g] = int(scaled)
    forloop = op.forloop
    if len(loop_ratio) == 1:
        scaled = forloop * next(iter(loop_ratio))
        if scaled.denominator == 1 and scaled >= 1:
            forloop = int(scaled)
    return (grid[0], grid[1], grid[2]), forloop


def retarget_customized(
    op: kernel.CustomizedOp, operands: Sequence[SSAValue]
) -> kernel.CustomizedOp:
    arg_types = [v.type for v in operands]
    grid, forloop = scaled_partition(op, arg_types)  # type: ignore[arg-type]

    def input_tile(inner: Operation, new_operands: Sequence[SSAValue]):
        if not isinstance(inner, block.InputOp):
            return None
        source = new_operands[0]
        window = inner.window_of
        try:
            tile = shapes.tile_shape(
                block.input_view(
                    t.tensor_shape(source),
                    len(t.tensor_shape(inner.result)),
                    inner.swapped_dims,
                    window,
                ),
                inner.input_map,
                inner.forloop_dim,
                grid,
                forloop,
            )
        except shapes.ShapeError as e:
            raise RetargetError(f"'block.input': {e}") from None
        return block.InputOp(
            source,
            inner.input_map,
            inner.forloop_dim,
            t.result_type_like(source, tile),
            window,
            inner.swapped_dims,
        )

    body, _ = rebuild_block(op.entry, arg_types, input_tile)
    outputs = [o for o in body.ops if isinstance(o, block.OutputOp)]
    try:
        result_types = [
            t.result_type_like(
                o.input,
                shapes.stitched_shape(t.tensor_shape(o.input), o.output_map, grid),
            )
            for o in outputs
        ]
    except shapes.ShapeError as e:
        raise RetargetError(f"'block.output': {e}") from None
    return kernel.CustomizedOp(
        operands, result_types, Region(body), grid, op.block_dims, forloop
    )


def retarget(fn: func.FuncOp, input_types: Sequence[Attribute]) -> func.FuncOp:
    """Rebuild ``fn`` for new input types (see the module docstring)."""

    def customized(op: Operation, operands: Sequence[SSAValue]):
        if isinstance(op, kernel.CustomizedOp):
            return retarget_customized(op, operands)
        return None

    body, _ = rebuild_block(fn.body.block, input_types, customized)
    ret = body.last_op
    assert ret is not None
    outputs = [v.type for v in ret.operands]
    return func.FuncOp(fn.sym_name.data, (list(input_types), outputs), Region(body))
