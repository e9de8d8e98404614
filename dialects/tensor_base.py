"""The base of every arithmetic op on tensors, and the checks they share.

``tensor_ops`` builds the op shapes of the kernel, block and thread dialects
on :class:`TensorOp`; ``layout_ops`` the ops that move elements.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import shapes

FLOAT_TYPES = (Float16Type, BFloat16Type, Float32Type)


def tensor_shape(value: SSAValue | Attribute) -> tuple[int, ...]:
    """Static shape of a tensor-typed value or type."""
    ty = value.type if isinstance(value, SSAValue) else value
    assert isinstance(ty, TensorType)
    return tuple(ty.get_shape())


def element_type(value: SSAValue) -> Attribute:
    ty = value.type
    assert isinstance(ty, TensorType)
    return ty.element_type


def check_float_tensors(op: Operation) -> None:
    """All operands and results are static float tensors of one element type."""
    values = [*op.operands, *op.results]
    for v in values:
        if not isinstance(v.type, TensorType):
            raise VerifyException(f"'{op.name}' expects tensor types, got {v.type}")
        if not isinstance(v.type.element_type, FLOAT_TYPES):
            raise VerifyException(
                f"'{op.name}' expects f16, bf16 or f32 elements, got "
                f"{v.type.element_type}"
            )
        if any(d < 1 for d in v.type.get_shape()):
            raise VerifyException(f"'{op.name}' expects static positive shapes")
    dtypes = {str(element_type(v)) for v in values}
    if len(dtypes) > 1:
        raise VerifyException(
            f"'{op.name}' mixes element types {sorted(dtypes)}; they must agree"
        )


def check_result_shape(op: Operation, expected: tuple[int, ...]) -> None:
    got = tensor_shape(op.results[0])
    if got != expected:
        raise VerifyException(
            f"'{op.name}' result shape {list(got)} does not match the "
            f"expected {list(expected)}"
        )


def result_type_like(value: SSAValue, shape: tuple[int, ...]) -> TensorType:
    return TensorType(element_type(value), shape)


class TensorOp(IRDLOperation):
    """Base of every arithmetic op on tensors, at any level."""

    KIND: ClassVar[str]

    def verify_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def constant_args(self) -> list[float]:
        """The float constants the constructor takes after the operands, so
        the same op can be rebuilt at another level: ``cls(*xs, *constants)``."""
        return []

    def verify_(self) -> None:
        check_float_tensors(self)
        try:
            expected = self.verify_shape()
        except shapes.ShapeError as e:
            raise VerifyException(f"'{self.name}': {e}") from None
        check_result_shape(self, expected)
