"""The block dialect: the graph one thread block runs inside a customized kernel.

Values are tiles in shared memory (builtin tensor types give the tile shape).
A block graph reads device tensors through ``block.input`` iterators, computes
with the same arithmetic as the kernel level, accumulates across the for-loop
with ``block.forloop_accum`` and writes tiles back with ``block.output``.

Ops that depend on a for-loop-partitioned input run on every iteration; ops
that depend on an accumulator run once after the loop. Example (one block of
FlashAttention-style GQA)::

    %q = block.input %arg0 imap [0, -1, 1] fmap -1
           : tensor<2x256x64xf16> -> tensor<1x64x64xf16>
    %k = block.input %arg1 imap [0, 2, -1] fmap 2
           : tensor<2x64x4096xf16> -> tensor<1x64x64xf16>
    %a = block.matmul %q, %k : ... -> tensor<1x64x64xf16>
    %s = block.forloop_accum %a reduce "none" : ... -> tensor<1x64x64xf16>
    block.output %s omap [0, 2, 1] : tensor<1x64x64xf16>
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    IntegerAttr,
    StringAttr,
    TensorType,
)
from xdsl.ir import Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import HasParent, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import shapes
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import check_isolated
from mirage_xdsl.dialects.kernel import CustomizedOp, dense_i64

ACCUM_REDUCTIONS = ("none", "sum", "mean", "rms")
"""How ``block.forloop_accum`` combines iterations:

- ``none``: element-wise sum over iterations (split-K accumulation);
- ``sum``: also sums the last dim (kept with size 1);
- ``mean``: ``sum`` divided by the full last-dim length (tile x iterations);
- ``rms``: ``sqrt(mean(x^2))`` over the last dim and all iterations.

With a ``shift`` operand (``none`` and ``sum`` only), each iteration's tile is
weighted by ``exp(shift_t - M)`` before it is added, where ``M`` is the
maximum of the shift over all iterations (element by element): the online
softmax. A block computes ``p_t = exp(s_t - m_t)`` against its own row
maximum ``m_t``; accumulating ``p_t · V`` and the row sums of ``p_t`` with
shift ``m_t`` rescales every earlier iteration to the running maximum, so
nothing overflows and the quotient is softmax's.
"""

SHIFTABLE_REDUCTIONS = ("none", "sum")
"""The reductions a ``shift`` may weight (a mean or RMS of rescaled terms is
no quantity anyone needs)."""


IN_BLOCK_GRAPH = HasParent(CustomizedOp)
"""Every block op lives directly in a ``kernel.customized`` region."""


def parent_customized(op: Operation) -> CustomizedOp:
    """The enclosing ``kernel.customized`` op, with a launch shape one can use."""
    parent = op.parent_op()
    if not isinstance(parent, CustomizedOp):
        raise VerifyException(
            f"'{op.name}' must be directly inside a 'kernel.customized' region"
        )
    parent.verify_launch()
    return parent


def input_view(
    source: Sequence[int],
    rank: int,
    transpose: Sequence[int] | None = None,
    window: Sequence[int] | None = None,
) -> shapes.Shape:
    """The shape a ``block.input`` indexes its ``source`` through: with two
    source dims swapped when ``transpose`` names them, then only ``window``'s
    ``(dim, start, end)`` of that view, then lifted to ``rank`` with leading
    size-1 dims (raises ``ShapeError`` on entries out of range)."""
    view = tuple(source)
    if transpose is not None:
        if len(transpose) != 2:
            raise shapes.ShapeError("transpose needs 2 entries (dim0, dim1)")
        view = shapes.transpose(view, *transpose)
    if window is not None:
        if len(window) != 3:
            raise shapes.ShapeError("window needs 3 entries (dim, start, end)")
        view = shapes.slice_(view, *window)
    return shapes.lift(view, rank)


@irdl_op_definition
class InputOp(IRDLOperation):
    """Input iterator: the tile of a device tensor a block loads per iteration.

    ``imap`` has one entry per grid dim: the tensor dim that grid dim splits,
    or -1 to replicate. ``fmap`` is the tensor dim split across for-loop
    iterations, or -1 to load the same tile on every iteration. With
    ``transpose [dim0, dim1]`` it reads the source with those two dims
    swapped (a ``kernel.transpose`` read in place, ``fold-transposes``); the
    maps and the window then count the dims of that transposed view. With
    ``window [dim, start, end]`` it reads only those elements of the view's
    ``dim`` (a ``kernel.slice`` read in place). A tile of
    higher rank than its source views the source with leading size-1 dims
    (numpy's alignment), which the maps count: a norm weight ``[h]`` read as
    a ``[1, 1, h]`` tile broadcasts against ``[b, t, h]`` tiles.
    """

    name = "block.input"

    source = operand_def(TensorType)
    imap = prop_def(DenseArrayBase[I64])
    fmap = prop_def(IntegerAttr[I64])
    transpose = opt_prop_def(DenseArrayBase[I64])
    window = opt_prop_def(DenseArrayBase[I64])
    result = result_def(TensorType)

    assembly_format = (
        "$source `imap` $imap `fmap` $fmap (`transpose` $transpose^)? "
        "(`window` $window^)? attr-dict `:` type($source) `->` type($result)"
    )

    traits = traits_def(Pure(), IN_BLOCK_GRAPH)

    def __init__(
        self,
        source: SSAValue,
        imap: Sequence[int],
        fmap: int,
        tile: TensorType,
        window: Sequence[int] | None = None,
        transpose: Sequence[int] | None = None,
    ):
        props = {"imap": dense_i64(imap), "fmap": IntegerAttr(fmap, 64)}
        if window is not None:
            props["window"] = dense_i64(window)
        if transpose is not None:
            props["transpose"] = dense_i64(transpose)
        super().__init__(operands=[source], result_types=[tile], properties=props)

    def retiled(self, fmap: int, tile: TensorType) -> InputOp:
        """A copy reading the same view of the same source with another
        ``fmap`` and tile."""
        return InputOp(
            self.source, self.input_map, fmap, tile, self.window_of, self.swapped_dims
        )

    @property
    def window_of(self) -> tuple[int, int, int] | None:
        """``(dim, start, end)`` of the view this input reads, or None."""
        if self.window is None:
            return None
        dim, start, end = self.window.get_values()
        return (dim, start, end)

    @property
    def swapped_dims(self) -> tuple[int, int] | None:
        """The two source dims this input reads swapped, or None."""
        if self.transpose is None:
            return None
        dim0, dim1 = self.transpose.get_values()
        return (dim0, dim1)

    @property
    def input_map(self) -> tuple[int, ...]:
        return tuple(self.imap.get_values())

    @property
    def forloop_dim(self) -> int:
        return self.fmap.value.data

    @property
    def viewed_shape(self) -> tuple[int, ...]:
        """The source's shape as the maps index it: transposed, windowed and
        lifted with leading size-1 dims up to the tile's rank
        (:func:`input_view`; raises ``ShapeError`` on a bad view)."""
        return input_view(
            t.tensor_shape(self.source),
            len(t.tensor_shape(self.result)),
            None if self.transpose is None else self.transpose.get_values(),
            None if self.window is None else self.window.get_values(),
        )

    def verify_(self) -> None:
        parent = parent_customized(self)
        if not (
            isinstance(self.source, SSAValue) and self.source.owner is parent.body.block
        ):
            raise VerifyException(
                f"'{self.name}' must read an argument of the customized kernel"
            )
        t.check_float_tensors(self)
        try:
            tile = shapes.tile_shape(
                self.viewed_shape,
                self.input_map,
                self.forloop_dim,
                parent.grid_dims,
                parent.forloop,
            )
        except shapes.ShapeError as e:
            raise VerifyException(f"'{self.name}': {e}") from None
        t.check_result_shape(self, tile)


@irdl_op_definition
class OutputOp(IRDLOperation):
    """Output saver: writes each block's tile into the kernel's result.

    ``omap[g]`` is the result dim that grid dim ``g`` indexes; every grid dim
    of size > 1 must be mapped. The result may have another float element
    type than the tile: blocks compute in fp32 and the store converts (a
    ``kernel.cast`` is a kernel that only stores).
    """

    name = "block.output"

    input = operand_def(TensorType)
    omap = prop_def(DenseArrayBase[I64])

    assembly_format = "$input `omap` $omap attr-dict `:` type($input)"

    traits = traits_def(IN_BLOCK_GRAPH)

    def __init__(self, input: SSAValue | Operation, omap: Sequence[int]):
        super().__init__(operands=[input], properties={"omap": dense_i64(omap)})

    @property
    def output_map(self) -> tuple[int, ...]:
        return tuple(self.omap.get_values())

    def verify_(self) -> None:
        parent = parent_customized(self)
        try:
            shapes.stitched_shape(
                t.tensor_shape(self.input),
                self.output_map,
                parent.grid_dims,
            )
        except shapes.ShapeError as e:
            raise VerifyException(f"'{self.name}': {e}") from None


@irdl_op_definition
class ForloopAccumOp(IRDLOperation):
    """Accumulates a per-iteration tile across the for-loop (see ACCUM_REDUCTIONS).

    The optional ``shift`` (one value per row: the input's shape with a last
    dim of 1) makes it the rescaling accumulation of the online softmax.
    """

    name = "block.forloop_accum"
    KIND: ClassVar[str] = "forloop_accum"

    input = operand_def(TensorType)
    shift = opt_operand_def(TensorType)
    reduce = prop_def(StringAttr)
    result = result_def(TensorType)

    assembly_format = (
        "$input (`shift` $shift^)? `reduce` $reduce attr-dict `:` type($input) "
        "(`,` type($shift)^)? `->` type($result)"
    )

    traits = traits_def(IN_BLOCK_GRAPH)

    def __init__(
        self,
        input: SSAValue | Operation,
        reduce: str = "none",
        shift: SSAValue | Operation | None = None,
    ):
        input = SSAValue.get(input)
        shape = t.tensor_shape(input)
        if reduce != "none":
            shape = (*shape[:-1], 1)
        super().__init__(
            operands=[input, [] if shift is None else [SSAValue.get(shift)]],
            result_types=[t.result_type_like(input, shape)],
            properties={"reduce": StringAttr(reduce)},
        )

    @property
    def reduction(self) -> str:
        return self.reduce.data

    @property
    def shifted(self) -> bool:
        """Whether this is an online-softmax (rescaling) accumulation."""
        return self.shift is not None

    def verify_(self) -> None:
        t.check_float_tensors(self)
        if self.reduction not in ACCUM_REDUCTIONS:
            raise VerifyException(
                f"'{self.name}' reduce must be one of {list(ACCUM_REDUCTIONS)}, "
                f"got '{self.reduction}'"
            )
        shape = t.tensor_shape(self.input)
        if self.shift is not None:
            self._verify_shift(shape)
        if self.reduction != "none":
            shape = (*shape[:-1], 1)
        t.check_result_shape(self, shape)

    def _verify_shift(self, shape: tuple[int, ...]) -> None:
        if self.reduction not in SHIFTABLE_REDUCTIONS:
            raise VerifyException(
                f"'{self.name}' with a shift must reduce "
                f"{' or '.join(repr(r) for r in SHIFTABLE_REDUCTIONS)}, "
                f"got '{self.reduction}'"
            )
        want = (*shape[:-1], 1)
        got = t.tensor_shape(self.shift)
        if got != want:
            raise VerifyException(
                f"'{self.name}' shift must have shape {list(want)} (one value "
                f"per row of the input), got {list(got)}"
            )


@irdl_op_definition
class MatmulOp(t.MatmulBase):
    name = "block.matmul"
    traits = traits_def(Pure(), IN_BLOCK_GRAPH)


@irdl_op_definition
class RmsNormOp(t.RmsNormBase):
    name = "block.rms_norm"
    traits = traits_def(Pure(), IN_BLOCK_GRAPH)


@irdl_op_definition
class ReduceSumOp(t.ReduceSumBase):
    name = "block.reduce_sum"
    traits = traits_def(Pure(), IN_BLOCK_GRAPH)


@irdl_op_definition
class ReduceMaxOp(t.ReduceMaxBase):
    name = "block.reduce_max"
    traits = traits_def(Pure(), IN_BLOCK_GRAPH)


@irdl_op_definition
class ConcatOp(t.ConcatBase):
    name = "block.concat"
    traits = traits_def(Pure(), IN_BLOCK_GRAPH)


@irdl_op_definition
class TransposeOp(t.TransposeBase):
    """Swap of two dims of a tile (the lowering of ``kernel.transpose``)."""

    name = "block.transpose"
    traits = traits_def(Pure(), IN_BLOCK_GRAPH)


@irdl_op_definition
class ThreadGraphOp(IRDLOperation):
    """A fused chain of element-wise ops run per thread on register values.

    The region's arguments stand for the operands; ``thread.yield`` returns the
    results. Lowering keeps the intermediates in registers, so the chain costs
    one pass over shared memory instead of one per op.
    """

    name = "block.thread_graph"

    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    body = region_def("single_block")

    assembly_format = (
        "`(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs) $body"
    )

    traits = traits_def(IN_BLOCK_GRAPH)

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        output_types: Sequence[TensorType],
        body: Region,
    ):
        super().__init__(
            operands=[list(inputs)], result_types=[list(output_types)], regions=[body]
        )

    @property
    def entry(self) -> Block:
        return self.body.block

    def verify_(self) -> None:
        check_isolated(self)
        if [a.type for a in self.entry.args] != [v.type for v in self.inputs]:
            raise VerifyException(
                f"'{self.name}' region arguments must match the input types"
            )
        last = self.entry.last_op
        if last is None or not last.has_trait(IsTerminator):
            raise VerifyException(f"'{self.name}' region must end in 'thread.yield'")
        if [v.type for v in last.operands] != [r.type for r in self.outputs]:
            raise VerifyException(
                f"'{self.name}' yields types that do not match its results"
            )
        for op in self.entry.ops:
            if not op.name.startswith("thread."):
                raise VerifyException(
                    f"'{self.name}' may only hold thread ops, found '{op.name}'"
                )


ELEMENTWISE_OPS = t.elementwise_ops("block", traits_def(Pure(), IN_BLOCK_GRAPH))
"""The element-wise ops of the op table on shared-memory tiles, by kind."""
globals().update({cls.__name__: cls for cls in ELEMENTWISE_OPS.values()})


BlockDialect = Dialect(
    "block",
    [
        InputOp,
        OutputOp,
        ForloopAccumOp,
        MatmulOp,
        *ELEMENTWISE_OPS.values(),
        RmsNormOp,
        ReduceSumOp,
        ReduceMaxOp,
        ConcatOp,
        TransposeOp,
        ThreadGraphOp,
    ],
    [],
)
