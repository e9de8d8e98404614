"""Layout ops shared by the dialects: they move elements and compute nothing.

Concatenation, slices, broadcasts, casts, transposes and reshapes. Every
element keeps its value (a cast keeps it too: kernels compute in fp32), so
the interpreter and the verifier move values and residues exactly, and the
search keeps the kernel-level ones between the segments it searches.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import I64, IntegerAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import operand_def, prop_def, result_def
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import shapes
from mirage_xdsl.dialects.tensor_base import (
    FLOAT_TYPES,
    TensorOp,
    check_result_shape,
    result_type_like,
    tensor_shape,
)


class ConcatBase(TensorOp):
    """Concatenation of two tensors along one dim."""

    KIND: ClassVar[str] = "concat"

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)

    assembly_format = (
        "$lhs `,` $rhs `dim` $dim attr-dict `:` type($lhs) `,` type($rhs) "
        "`->` type($result)"
    )

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation, dim: int):
        lhs, rhs = SSAValue.get(lhs), SSAValue.get(rhs)
        shape = shapes.concat(tensor_shape(lhs), tensor_shape(rhs), dim)
        super().__init__(
            operands=[lhs, rhs],
            properties={"dim": IntegerAttr(dim, 64)},
            result_types=[result_type_like(lhs, shape)],
        )

    def verify_shape(self) -> tuple[int, ...]:
        return shapes.concat(
            tensor_shape(self.lhs), tensor_shape(self.rhs), self.dim.value.data
        )


class SliceBase(TensorOp):
    """The elements ``[start, end)`` of one dim: a layout change, not arithmetic.

    Rotary embeddings take the two halves of the head dim
    (``rotate_half``), a fused projection is split into its parts. Every
    element keeps its value, so the verifier and the abstract expressions see
    through it; the lowering reads the window straight from device memory.
    """

    KIND: ClassVar[str] = "slice"

    input = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    start = prop_def(IntegerAttr[I64])
    end = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)

    assembly_format = (
        "$input `dim` $dim `start` $start `end` $end attr-dict `:` type($input) "
        "`->` type($result)"
    )

    def __init__(self, input: SSAValue | Operation, dim: int, start: int, end: int):
        input = SSAValue.get(input)
        shape = shapes.slice_(tensor_shape(input), dim, start, end)
        super().__init__(
            operands=[input],
            properties={
                name: IntegerAttr(v, 64)
                for name, v in (("dim", dim), ("start", start), ("end", end))
            },
            result_types=[result_type_like(input, shape)],
        )

    @property
    def window(self) -> tuple[int, int, int]:
        """``(dim, start, end)``."""
        return (self.dim.value.data, self.start.value.data, self.end.value.data)

    def verify_shape(self) -> tuple[int, ...]:
        return shapes.slice_(tensor_shape(self.input), *self.window)


class BroadcastBase(TensorOp):
    """A tensor stretched along its size-1 dims, numpy's ``broadcast_to``:
    a layout change (``torch.expand`` of a computed tensor; attention's
    ``repeat_kv``). Every element keeps its value; the lowering writes each
    stretched copy from one tile."""

    KIND: ClassVar[str] = "broadcast"

    input = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: tuple[int, ...]):
        input = SSAValue.get(input)
        new = shapes.expand(tensor_shape(input), shape)
        super().__init__(operands=[input], result_types=[result_type_like(input, new)])

    def verify_shape(self) -> tuple[int, ...]:
        return shapes.expand(tensor_shape(self.input), tensor_shape(self.result))


class CastBase(TensorOp):
    """The same values in another float element type: f16, bf16, f32.

    Kernels compute in fp32 whatever their tensors hold, so a cast changes
    only how a value is stored: the interpreter (an fp32 reference) and the
    finite-field verifier take it as the identity, and the lowering writes
    the tile in the result's element type.
    """

    KIND: ClassVar[str] = "cast"

    input = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, dtype: Attribute):
        input = SSAValue.get(input)
        ty = TensorType(dtype, tensor_shape(input))
        super().__init__(operands=[input], result_types=[ty])

    def verify_(self) -> None:
        for v in (self.input, self.result):
            ty = v.type
            if not isinstance(ty, TensorType) or not isinstance(
                ty.element_type, FLOAT_TYPES
            ):
                raise VerifyException(
                    f"'{self.name}' casts between f16, bf16 and f32 tensors, got {ty}"
                )
        check_result_shape(self, tensor_shape(self.input))


class TransposeBase(TensorOp):
    """Swap of two dims: a layout change, not arithmetic.

    Attention code swaps the sequence and head dims of its projections and
    multiplies by the transpose of K; both are this op. Every element keeps its
    value, so the verifier and the abstract expressions see through it.
    """

    KIND: ClassVar[str] = "transpose"

    input = operand_def(TensorType)
    dim0 = prop_def(IntegerAttr[I64])
    dim1 = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)

    assembly_format = (
        "$input `dims` $dim0 `,` $dim1 attr-dict `:` type($input) `->` type($result)"
    )

    def __init__(self, input: SSAValue | Operation, dim0: int, dim1: int):
        input = SSAValue.get(input)
        shape = shapes.transpose(tensor_shape(input), dim0, dim1)
        super().__init__(
            operands=[input],
            properties={"dim0": IntegerAttr(dim0, 64), "dim1": IntegerAttr(dim1, 64)},
            result_types=[result_type_like(input, shape)],
        )

    @property
    def dims(self) -> tuple[int, int]:
        """The two swapped dims, counted from the front."""
        return (self.dim0.value.data, self.dim1.value.data)

    def verify_shape(self) -> tuple[int, ...]:
        return shapes.transpose(tensor_shape(self.input), *self.dims)


class ReshapeBase(TensorOp):
    """Row-major reshape: the same elements in the same order, another shape.

    Splitting ``[b, s, h * d]`` into heads ``[b, s, h, d]`` is one; in device
    memory it moves nothing, so the lowering gives both sides one buffer.
    """

    KIND: ClassVar[str] = "reshape"

    input = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: tuple[int, ...]):
        input = SSAValue.get(input)
        new = shapes.reshape(tensor_shape(input), shape)
        super().__init__(operands=[input], result_types=[result_type_like(input, new)])

    def verify_shape(self) -> tuple[int, ...]:
        return shapes.reshape(tensor_shape(self.input), tensor_shape(self.result))
