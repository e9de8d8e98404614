"""Mutants of a µGraph: small edits that keep the IR valid but change what it
computes, the soundness corpus of the equivalence verifier.

Each mutation operator proposes edits to one op of the program; an edit is
applied to a clone, and the clone is kept only if it still verifies (shapes,
partition maps, for-loop phases, shared memory) and differs textually from the
original and from every mutant kept before. Operators:

- ``imap`` / ``fmap`` / ``omap``: another partition map giving the same tile
  or stitched shape (wrong tile of the input, transposed placement, ...);
- ``accum``: another for-loop reduction of the same shape (sum/mean/rms);
- ``operand``: an operand replaced by another value of the same type
  (swapped or wrong inputs);
- ``swap``: operands of a non-commutative op exchanged;
- ``kind``: an element-wise unary op replaced by another of its level (the
  wrong activation: ``gelu`` for ``relu``, ``sigmoid`` for ``silu``, ...);
- ``reduce``: a reduction replaced by the other one (a maximum for a sum, a
  sum for a maximum: softmax's normaliser or shift taken wrongly), or taken
  over another dim of the same size;
- ``drop``: an op bypassed, its operand used in its place (dropped
  normalisation, missing exp, missing accumulation, ...);
- ``double`` / ``factor`` / ``term``: a result scaled by two, multiplied by its
  factor again, or its addend added again (off-by-constant errors);
- ``constant``: a float constant (``mul_scalar``, ``add_scalar``, ``rms_norm``'s
  ``eps``) doubled, halved or moved by one (a wrong scale or epsilon).

Some edits are accidentally equivalent (``rms_norm(2x) = rms_norm(x)``);
callers filter them with the float cross-check (see ``tests/test_mutants.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import (
    Float64Type,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import Rewriter

from mirage_xdsl.dialects import block, kernel, shapes, thread
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.kernel import dense_i64
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.ops import OPS, Form, OpSpec, kinds

Edit = Callable[[Operation], None]
"""Changes the op (in a clone of the program) it is given."""

LEVELS = {"kernel": kernel, "block": block, "thread": thread}


def _commutes(spec: OpSpec) -> bool:
    """Whether a binary op's value stays the same with its operands swapped
    (on two sample operands)."""
    x, y = np.array([2.0, 3.0]), np.array([5.0, 7.0])
    return bool(np.array_equal(spec.real(x, y), spec.real(y, x)))


NON_COMMUTATIVE = (
    *(k for k in kinds(Form.BINARY) if not _commutes(OPS[k])),
    "matmul",
    "concat",
)
REDUCTIONS = ("sum", "mean", "rms")


@dataclass(frozen=True)
class Mutant:
    description: str
    module: ModuleOp


def _maps(rank: int) -> Iterator[tuple[int, int, int]]:
    for m in itertools.product(range(-1, rank), repeat=3):
        used = [d for d in m if d >= 0]
        if len(used) == len(set(used)):
            yield m


def _effective(mapping: Sequence[int], grid: Sequence[int]) -> tuple[int, ...]:
    """A partition map with the entries of size-1 grid dims (which split
    nothing) cleared: maps equal here are the same partition."""
    return tuple(d if g > 1 else -1 for d, g in zip(mapping, grid, strict=True))


def _same(fn: Callable[[], object], expected: object) -> bool:
    try:
        return fn() == expected
    except shapes.ShapeError:
        return False


def _set_prop(name: str, value) -> Edit:
    def edit(op: Operation) -> None:
        op.properties[name] = value

    return edit


def _input_edits(op: block.InputOp) -> Iterator[tuple[str, Edit]]:
    parent = op.parent_op()
    grid, forloop = parent.grid_dims, parent.forloop  # type: ignore[union-attr]
    source = t.tensor_shape(op.source)
    tile = t.tensor_shape(op.result)
    for imap in _maps(len(source)):
        if _effective(imap, grid) != _effective(op.input_map, grid) and _same(
            lambda imap=imap: shapes.tile_shape(
                source, imap, op.forloop_dim, grid, forloop
            ),
            tile,
        ):
            yield f"imap {list(imap)}", _set_prop("imap", dense_i64(imap))
    for fmap in range(-1, len(source)):
        if (
            forloop > 1
            and fmap != op.forloop_dim
            and _same(
                lambda fmap=fmap: shapes.tile_shape(
                    source, op.input_map, fmap, grid, forloop
                ),
                tile,
            )
        ):
            yield f"fmap {fmap}", _set_prop("fmap", IntegerAttr(fmap, 64))


def _output_edits(op: block.OutputOp) -> Iterator[tuple[str, Edit]]:
    grid = op.parent_op().grid_dims  # type: ignore[union-attr]
    tile = t.tensor_shape(op.input)
    full = shapes.stitched_shape(tile, op.output_map, grid)
    for omap in _maps(len(tile)):
        if _effective(omap, grid) != _effective(op.output_map, grid) and _same(
            lambda omap=omap: shapes.stitched_shape(tile, omap, grid), full
        ):
            yield f"omap {list(omap)}", _set_prop("omap", dense_i64(omap))


def _accum_edits(op: block.ForloopAccumOp) -> Iterator[tuple[str, Edit]]:
    if op.shifted:
        yield "shift dropped", _drop_shift
    if op.reduction == "none":
        return
    for r in REDUCTIONS:
        if r != op.reduction:
            yield f"reduce {r}", _set_prop("reduce", StringAttr(r))


def _drop_shift(clone: Operation) -> None:
    """The online softmax's rescaling left out of one accumulation: its terms
    keep the shifts of their own iterations."""
    assert isinstance(clone, block.ForloopAccumOp)
    Rewriter.replace_op(clone, block.ForloopAccumOp(clone.input, clone.reduction))


def _other_constants(c: float) -> list[float]:
    """Wrong values for a constant ``c``: doubled, halved and moved by one,
    distinct from ``c`` and from each other."""
    return list(dict.fromkeys(v for v in (2 * c, c / 2, c + 1) if v != c))


def _constant_edits(op: Operation) -> Iterator[tuple[str, Edit]]:
    if isinstance(op, t.ScalarOp):
        name, value = "scalar", op.value
    elif isinstance(op, t.RmsNormBase) and op.eps_value:
        name, value = "eps", op.eps_value
    else:
        return
    for other in _other_constants(value):
        yield (
            f"constant {name} {value!r} -> {other!r}",
            _set_prop(name, FloatAttr(other, Float64Type())),
        )


def _visible(op: Operation) -> list[SSAValue]:
    """Values an operand of ``op`` may use: earlier results, and the block's
    arguments unless they are a customized kernel's device tensors (a block
    graph reads those only through ``block.input``)."""
    blk = op.parent_block()
    assert blk is not None
    owner = blk.parent_op()
    device = owner is not None and owner.name == "kernel.customized"
    values: list[SSAValue] = [] if device else list(blk.args)
    for other in blk.ops:
        if other is op:
            break
        values.extend(other.results)
    return values


def _operand_edits(op: Operation) -> Iterator[tuple[str, Edit]]:
    visible = _visible(op)
    for i, value in enumerate(op.operands):
        for j, other in enumerate(visible):
            if other is not value and other.type == value.type:

                def edit(clone: Operation, i=i, j=j) -> None:
                    clone.operands[i] = _visible(clone)[j]

                yield f"operand {i} <- value {j}", edit


def _swap_edits(op: Operation) -> Iterator[tuple[str, Edit]]:
    kind = getattr(op, "KIND", None)
    if kind in NON_COMMUTATIVE and len(op.operands) == 2:

        def edit(clone: Operation) -> None:
            a, b = clone.operands
            clone.operands[0], clone.operands[1] = b, a

        yield "swap operands", edit


def _kind_edits(op: Operation) -> Iterator[tuple[str, Edit]]:
    """An element-wise unary op replaced by every other one of its level (exp
    for silu, relu for gelu, ...): the wrong activation, on the same value."""
    kind = getattr(op, "KIND", None)
    if kind not in t.ELEMENTWISE_UNARY_KINDS:
        return
    ops = LEVELS[op.name.split(".")[0]].ELEMENTWISE_OPS
    for other, cls in ops.items():
        if other == kind or OPS[other].form is not Form.UNARY:
            continue

        def edit(clone: Operation, cls: type[Operation] = cls) -> None:
            Rewriter.replace_op(clone, cls(clone.operands[0]))  # type: ignore[call-arg]

        yield f"kind -> {other}", edit


def _reduction_edits(op: Operation) -> Iterator[tuple[str, Edit]]:
    """``reduce_sum`` <-> ``reduce_max`` on the same dim, and either over
    another dim when the result keeps its type."""
    kind = getattr(op, "KIND", None)
    if kind not in t.REDUCE_KINDS:
        return
    level = LEVELS[op.name.split(".")[0]]
    dim = op.dim.value.data  # type: ignore[attr-defined]
    other = "reduce_max" if kind == "reduce_sum" else "reduce_sum"
    cls = level.ReduceMaxOp if other == "reduce_max" else level.ReduceSumOp

    def swap(clone: Operation) -> None:
        Rewriter.replace_op(clone, cls(clone.operands[0], dim))

    yield f"reduce -> {other}", swap
    source = t.tensor_shape(op.operands[0])
    for d in range(len(source)):
        if d != dim and source[d] == source[dim]:
            yield f"reduce dim {d}", _set_prop("dim", IntegerAttr(d, 64))


def _layout_edits(op: Operation) -> Iterator[tuple[str, Edit]]:
    """A transpose of another pair of dims, where the result keeps its type."""
    if getattr(op, "KIND", None) != "transpose":
        return
    source, result = t.tensor_shape(op.operands[0]), t.tensor_shape(op.results[0])
    for a in range(len(source)):
        for b in range(a + 1, len(source)):
            if {a, b} == set(op.dims) or not _same(  # type: ignore[attr-defined]
                lambda a=a, b=b: shapes.transpose(source, a, b), result
            ):
                continue

            def edit(clone: Operation, a=a, b=b) -> None:
                clone.properties["dim0"] = IntegerAttr(a, 64)
                clone.properties["dim1"] = IntegerAttr(b, 64)

            yield f"transpose dims {a}, {b}", edit


def _drop_edits(op: Operation) -> Iterator[tuple[str, Edit]]:
    if not isinstance(op, t.TensorOp | block.ForloopAccumOp) or len(op.results) != 1:
        return
    for i, value in enumerate(op.operands):
        if value.type == op.results[0].type:

            def edit(clone: Operation, i=i) -> None:
                clone.results[0].replace_all_uses_with(clone.operands[i])

            yield f"drop (use operand {i})", edit


def _insert_after(op: Operation, make: Callable[[SSAValue], Operation]) -> None:
    result = op.results[0]
    new = make(result)
    blk = op.parent_block()
    assert blk is not None
    blk.insert_op_after(new, op)
    result.replace_uses_with_if(new.results[0], lambda use: use.operation is not new)


def _scale_edits(op: Operation) -> Iterator[tuple[str, Edit]]:
    if not isinstance(op, t.TensorOp | block.ForloopAccumOp) or len(op.results) != 1:
        return
    level = LEVELS[op.name.split(".")[0]]
    yield (
        "double",
        lambda clone: _insert_after(clone, lambda r: level.AddOp(r, r)),
    )
    kind = getattr(op, "KIND", None)
    if kind in ("mul", "add") and op.operands[1].type == op.results[0].type:
        cls = level.MulOp if kind == "mul" else level.AddOp
        name = "factor" if kind == "mul" else "term"
        yield (
            f"{name} again",
            lambda clone: _insert_after(clone, lambda r: cls(r, clone.operands[1])),
        )


def _edits(op: Operation) -> Iterator[tuple[str, Edit]]:
    if isinstance(op, block.InputOp):
        yield from _input_edits(op)
        return
    if isinstance(op, block.OutputOp):
        yield from _output_edits(op)
        yield from _operand_edits(op)
        return
    if isinstance(op, block.ForloopAccumOp):
        yield from _accum_edits(op)
    if isinstance(op, t.TensorOp | block.ForloopAccumOp):
        yield from _constant_edits(op)
        yield from _operand_edits(op)
        yield from _swap_edits(op)
        yield from _kind_edits(op)
        yield from _reduction_edits(op)
        yield from _layout_edits(op)
        yield from _drop_edits(op)
        yield from _scale_edits(op)


def _valid(module: ModuleOp) -> bool:
    try:
        module.verify()
    except Exception:
        return False
    return True


def mutants(program: ModuleOp) -> list[Mutant]:
    """Every valid, textually distinct single-edit mutant of ``program``."""
    ops = list(program.walk())
    seen = {module_text(program)}
    found: list[Mutant] = []
    for index, op in enumerate(ops):
        for description, edit in _edits(op):
            clone = program.clone()
            target = list(clone.walk())[index]
            try:
                edit(target)
            except Exception:
                continue
            if not _valid(clone):
                continue
            text = module_text(clone)
            if text in seen:
                continue
            seen.add(text)
            found.append(Mutant(f"{op.name} #{index}: {description}", clone))
    return found
