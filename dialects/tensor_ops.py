"""Op shapes shared by the kernel, block and thread dialects.

The three µGraph levels offer the same arithmetic on tensors that live in
different memories (device memory, shared memory, registers). Each concrete op
class in ``kernel``, ``block`` and ``thread`` derives from one of the bases here
(or, for the ops that move elements, in ``layout_ops``; their common base,
:class:`TensorOp`, is in ``tensor_base``) and so inherits its operands,
assembly format and shape verifier. The class variable ``KIND`` names the
operation independently of its level: the interpreter, the abstract
expressions, the cost model and the lowering read their tables by ``KIND``, so
each op says once what it means. The bases of the other modules are
re-exported here, so every dialect reads its bases from one place.
"""

from __future__ import annotations

import math
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    TensorType,
)
from xdsl.ir import Dialect, Operation, OpTraits, SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
)
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import shapes
from mirage_xdsl.dialects.layout_ops import (  # noqa: F401 (the dialects' bases)
    BroadcastBase,
    CastBase,
    ConcatBase,
    ReshapeBase,
    SliceBase,
    TransposeBase,
)
from mirage_xdsl.dialects.tensor_base import (  # noqa: F401 (used as t.*)
    FLOAT_TYPES,
    TensorOp,
    check_float_tensors,
    check_result_shape,
    element_type,
    result_type_like,
    tensor_shape,
)
from mirage_xdsl.ops import OPS, Form, elementwise_kinds, kinds


class UnaryOp(TensorOp):
    """Element-wise unary op: the result has the operand's type."""

    input = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation):
        input = SSAValue.get(input)
        super().__init__(operands=[input], result_types=[input.type])

    def verify_shape(self) -> tuple[int, ...]:
        return tensor_shape(self.input)


def check_finite(op: Operation, what: str, value: float) -> None:
    """A constant must be a finite number: NaN or infinity has no exact meaning in
    the finite-field verifier and would poison every value it touches."""
    if not math.isfinite(value):
        raise VerifyException(
            f"'{op.name}' {what} must be a finite number, got {value}"
        )


class ScalarOp(TensorOp):
    """Element-wise op with a float constant ``scalar`` (an f64 property).

    The constant is kept as f64 so a Python float round-trips exactly; the
    lowering prints it exactly and the verifier reads it as an exact rational.
    """

    input = operand_def(TensorType)
    scalar = prop_def(FloatAttr[Float64Type])
    result = result_def(TensorType)

    assembly_format = "$input `,` $scalar attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, scalar: float):
        input = SSAValue.get(input)
        super().__init__(
            operands=[input],
            properties={"scalar": FloatAttr(float(scalar), Float64Type())},
            result_types=[input.type],
        )

    @property
    def value(self) -> float:
        """The constant as a Python float."""
        return self.scalar.value.data

    def constant_args(self) -> list[float]:
        return [self.value]

    def verify_shape(self) -> tuple[int, ...]:
        check_finite(self, "scalar", self.value)
        return tensor_shape(self.input)


def check_tile_ranks(op: Operation, lhs: tuple[int, ...], rhs: tuple[int, ...]) -> None:
    """Device tensors broadcast by numpy's rules (a lower-rank operand lines up
    with the trailing dims); tiles inside a block graph have equal ranks."""
    if not op.name.startswith("kernel."):
        shapes.same_rank(lhs, rhs)


class BinaryOp(TensorOp):
    """Element-wise binary op, broadcast by numpy's rules: a lower-rank operand
    lines up with the trailing dims, and size-1 dims stretch (at the kernel
    level; block and thread tiles have equal ranks)."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = (
        "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"
    )

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        lhs, rhs = SSAValue.get(lhs), SSAValue.get(rhs)
        shape = shapes.broadcast(tensor_shape(lhs), tensor_shape(rhs))
        super().__init__(
            operands=[lhs, rhs], result_types=[result_type_like(lhs, shape)]
        )

    def verify_shape(self) -> tuple[int, ...]:
        lhs, rhs = tensor_shape(self.lhs), tensor_shape(self.rhs)
        check_tile_ranks(self, lhs, rhs)
        return shapes.broadcast(lhs, rhs)


class MatmulBase(TensorOp):
    """Matmul over the last two dims, its leading (batch) dims broadcast by
    numpy's rules: ``[b, t, k] x [k, n]`` multiplies every batch by one weight."""

    KIND: ClassVar[str] = "matmul"

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = (
        "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"
    )

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        lhs, rhs = SSAValue.get(lhs), SSAValue.get(rhs)
        shape = shapes.matmul(tensor_shape(lhs), tensor_shape(rhs))
        super().__init__(
            operands=[lhs, rhs], result_types=[result_type_like(lhs, shape)]
        )

    def verify_shape(self) -> tuple[int, ...]:
        lhs, rhs = tensor_shape(self.lhs), tensor_shape(self.rhs)
        check_tile_ranks(self, lhs, rhs)
        return shapes.matmul(lhs, rhs)


class ReductionOp(TensorOp):
    """A reduction over one dim, which is kept with size 1."""

    input = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)

    assembly_format = "$input `dim` $dim attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, dim: int):
        input = SSAValue.get(input)
        shape = shapes.reduce(tensor_shape(input), dim)
        super().__init__(
            operands=[input],
            properties={"dim": IntegerAttr(dim, 64)},
            result_types=[result_type_like(input, shape)],
        )

    def verify_shape(self) -> tuple[int, ...]:
        return shapes.reduce(tensor_shape(self.input), self.dim.value.data)


class ReduceSumBase(ReductionOp):
    """Sum over one dim, which is kept with size 1."""

    KIND: ClassVar[str] = "reduce_sum"


class ReduceMaxBase(ReductionOp):
    """Maximum over one dim, which is kept with size 1.

    Used to shift a softmax row by its maximum (``exp(x - max(x))``) so that
    the exponentials stay finite at natural input scales.
    """

    KIND: ClassVar[str] = "reduce_max"


class RmsNormBase(TensorOp):
    """RMSNorm over the last dim with unit weight: x / sqrt(mean(x^2) + eps).

    ``eps`` is optional and printed only when set; absent means 0.
    """

    KIND: ClassVar[str] = "rms_norm"

    input = operand_def(TensorType)
    eps = opt_prop_def(FloatAttr[Float64Type])
    result = result_def(TensorType)

    assembly_format = (
        "$input (`eps` $eps^)? attr-dict `:` type($input) `->` type($result)"
    )

    def __init__(self, input: SSAValue | Operation, eps: float = 0.0):
        input = SSAValue.get(input)
        props = {"eps": FloatAttr(float(eps), Float64Type())} if eps else {}
        super().__init__(operands=[input], properties=props, result_types=[input.type])

    @property
    def eps_value(self) -> float:
        """The epsilon as a Python float (0 when absent)."""
        return 0.0 if self.eps is None else self.eps.value.data

    def constant_args(self) -> list[float]:
        return [self.eps_value] if self.eps_value else []

    def verify_shape(self) -> tuple[int, ...]:
        check_finite(self, "eps", self.eps_value)
        if self.eps_value < 0:
            raise VerifyException(
                f"'{self.name}' eps must not be negative, got {self.eps_value}"
            )
        return tensor_shape(self.input)


FORM_BASES: dict[Form, type[TensorOp]] = {
    Form.UNARY: UnaryOp,
    Form.SCALAR: ScalarOp,
    Form.BINARY: BinaryOp,
}
"""The base class (operands, assembly format, shape rule) of each
element-wise form of the op table."""


def elementwise_ops(level: str, traits: OpTraits) -> dict[str, type[TensorOp]]:
    """The op classes of every element-wise entry of the op table that
    ``level``'s dialect defines, by kind: ``{level}.{kind}`` with the entry's
    docstring, its form's base and ``traits``. Each dialect module binds them
    to module names (``ExpOp``, ``GeluErfOp``, ...) and lists them in its
    ``Dialect``, so a new table entry is a new op at every level."""
    classes: dict[str, type[TensorOp]] = {}
    for kind in elementwise_kinds(level):
        spec = OPS[kind]
        body = {
            "__doc__": spec.doc,
            "__module__": f"mirage_xdsl.dialects.{level}",
            "__qualname__": f"{spec.camel}Op",
            "name": f"{level}.{kind}",
            "KIND": kind,
            "__annotations__": {"KIND": ClassVar[str]},
            "traits": traits,
        }
        cls = type(f"{spec.camel}Op", (FORM_BASES[spec.form],), body)
        classes[kind] = irdl_op_definition(cls)
    return classes


def by_kind(dialect: Dialect) -> dict[str, type[Operation]]:
    """The ops of ``dialect`` that name a ``KIND`` (its arithmetic ops, and
    ``block.forloop_accum``), by kind, in the dialect's order."""
    return {
        op.KIND: op  # type: ignore[attr-defined]
        for op in dialect.operations
        if getattr(op, "KIND", None) is not None
    }


UNARY_KINDS = (*kinds(Form.UNARY), "rms_norm")
"""One-operand arithmetic kinds: the element-wise ones, then ``rms_norm``."""
ELEMENTWISE_UNARY_KINDS = kinds(Form.UNARY)
"""Unary kinds computed element by element (every unary kind but ``rms_norm``)."""
BINARY_KINDS = kinds(Form.BINARY)
SCALAR_KINDS = kinds(Form.SCALAR)
"""Element-wise ops with a float constant; each reads ``op.value``."""
LAYOUT_KINDS = kinds(
    Form.TRANSPOSE, Form.RESHAPE, Form.SLICE, Form.CONCAT, Form.BROADCAST, Form.CAST
)
"""Ops that move elements without computing: the search works between them
(at the kernel level; ``block.concat`` is the search's own)."""
REDUCE_KINDS = kinds(Form.REDUCTION)
"""Reductions over one ``dim`` kept with size 1 (:class:`ReductionOp`)."""
