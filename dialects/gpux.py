"""The gpux dialect: the GPU operations xDSL's ``gpu``/``memref``/``arith`` lack.

The GPU-level IR of mirage-xdsl is built on xDSL's ``gpu`` (kernels, thread
and block ids, barriers), ``scf`` (loops), ``arith``/``math`` (scalar
arithmetic) and ``memref`` (loads and stores). This dialect adds what an
NVIDIA tensor-core kernel needs beyond those, one op per hardware primitive:

- ``gpux.shared_alloc``: a tile of the kernel's dynamic shared memory at a
  byte offset the shared-memory planner chose (memory space
  ``#gpux<memory_space workgroup>``; strided layouts express padding);
- ``gpux.cp_async`` / ``cp_async_commit`` / ``cp_async_wait``: Ampere-style
  asynchronous global-to-shared copies (4, 8 or 16 bytes) and their groups;
- ``gpux.copy``: a synchronous vectorised copy of a few contiguous elements,
  converting the element type if source and destination differ;
- ``gpux.ldmatrix``: load 8x8 b16 matrices from shared memory into a warp's
  fragments (``.x1/.x2/.x4``, optionally transposed);
- ``gpux.mma``: ``mma.sync.aligned.m16n8k16`` with f16 or bf16 operands and
  f32 accumulators;
- ``gpux.shfl_xor``: a butterfly warp shuffle, for warp reductions.

Fragments are builtin vectors: an A fragment is ``vector<8xf16>`` (four 32-bit
registers), a B fragment ``vector<4xf16>`` and an accumulator
``vector<4xf32>``, laid out per thread as the PTX ISA specifies for
``mma.m16n8k16``; bf16 fragments are the same with ``bf16`` elements (the
layouts depend only on the 16-bit width).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from enum import auto
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    BFloat16Type,
    BoolAttr,
    Float16Type,
    Float32Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    VectorType,
    f32,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Dialect, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum


class MemorySpace(StrEnum):
    WORKGROUP = auto()


@irdl_attr_definition
class MemorySpaceAttr(EnumAttribute[MemorySpace], SpacedOpaqueSyntaxAttribute):
    """Memory space of a memref: ``#gpux<memory_space workgroup>`` is shared memory."""

    name = "gpux.memory_space"


WORKGROUP = MemorySpaceAttr(MemorySpace.WORKGROUP)

MMA_C = VectorType(f32, [4])
MMA_OPERAND_TYPES = (Float16Type, BFloat16Type)
"""Element types tensor cores multiply (``ldmatrix`` moves any 16-bit type)."""
COPY_BYTES = (4, 8, 16)


def is_mma_operand(ty: Attribute) -> bool:
    """Whether ``ty`` is an element type of ``mma.m16n8k16`` operands."""
    return isinstance(ty, MMA_OPERAND_TYPES)


def fragment(element: Attribute, lanes: int) -> VectorType:
    """The fragment type holding ``lanes`` elements of an operand type."""
    return VectorType(element, [lanes])


def is_shared(memref: SSAValue | Attribute) -> bool:
    ty = memref.type if isinstance(memref, SSAValue) else memref
    return isinstance(ty, MemRefType) and ty.memory_space == WORKGROUP


def _check_indices(op: IRDLOperation, memref: SSAValue, indices: Sequence) -> None:
    assert isinstance(memref.type, MemRefType)
    if len(indices) != memref.type.get_num_dims():
        raise VerifyException(
            f"'{op.name}' needs {memref.type.get_num_dims()} indices for "
            f"{memref.type}, got {len(indices)}"
        )


@irdl_op_definition
class SharedAllocOp(IRDLOperation):
    """A tile of dynamic shared memory at a planned byte offset.

    Tiles of values whose lifetimes do not overlap may share bytes; the plan is
    made once per kernel (``lowering/shared_plan.py``), so this op only names
    where a tile lives and how it is laid out.
    """

    name = "gpux.shared_alloc"

    offset = prop_def(IntegerAttr[I64])
    result = result_def(MemRefType)

    assembly_format = "`[` $offset `]` attr-dict `:` type($result)"

    traits = traits_def(Pure())

    def __init__(self, offset: int, memref_type: MemRefType):
        super().__init__(
            result_types=[memref_type], properties={"offset": IntegerAttr(offset, 64)}
        )

    def verify_(self) -> None:
        if not is_shared(self.result):
            raise VerifyException(
                f"'{self.name}' must produce a memref in the workgroup memory space"
            )
        if self.offset.value.data % 16:
            raise VerifyException(f"'{self.name}' offset must be 16-byte aligned")


def _copy_format(size: str) -> str:
    """The assembly format of a copy whose amount is the property ``size``."""
    return (
        f"$dst `[` $dst_indices `]` `,` $src `[` $src_indices `]` `,` ${size} "
        "attr-dict `:` type($dst) `,` type($src)"
    )


class IndexedCopyOperation(IRDLOperation, abc.ABC):
    """Base of the copies from ``src[src_indices]`` to ``dst[dst_indices]``.

    ``gpux.cp_async`` and ``gpux.copy`` address both memrefs the same way and
    differ only in how the amount copied is counted (bytes or elements), in its
    property's name and in what they may copy, so the operands, the constructor
    and the index checks live here and the assembly format comes from
    :func:`_copy_format`. A concrete op names its size property in ``SIZE`` and
    defines it.
    """

    SIZE: ClassVar[str]
    """The name of the property that holds the amount copied."""

    dst = operand_def(MemRefType)
    dst_indices = var_operand_def(IndexType)
    src = operand_def(MemRefType)
    src_indices = var_operand_def(IndexType)

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        dst: SSAValue,
        dst_indices: Sequence[SSAValue],
        src: SSAValue,
        src_indices: Sequence[SSAValue],
        size: int,
    ):
        super().__init__(
            operands=[dst, list(dst_indices), src, list(src_indices)],
            properties={self.SIZE: IntegerAttr(size, 64)},
        )

    def verify_(self) -> None:
        _check_indices(self, self.dst, self.dst_indices)
        _check_indices(self, self.src, self.src_indices)


@irdl_op_definition
class CpAsyncOp(IndexedCopyOperation):
    """Asynchronous copy of ``bytes`` bytes from global to shared memory."""

    name = "gpux.cp_async"

    SIZE: ClassVar[str] = "bytes"
    bytes = prop_def(IntegerAttr[I64])

    assembly_format = _copy_format(SIZE)

    def verify_(self) -> None:
        super().verify_()
        if not is_shared(self.dst) or is_shared(self.src):
            raise VerifyException(f"'{self.name}' copies from global to shared memory")
        if self.bytes.value.data not in COPY_BYTES:
            raise VerifyException(f"'{self.name}' copies 4, 8 or 16 bytes")
        if self.dst.type.element_type != self.src.type.element_type:  # type: ignore[attr-defined]
            raise VerifyException(f"'{self.name}' cannot convert element types")


@irdl_op_definition
class CpAsyncCommitOp(IRDLOperation):
    """Closes the group of cp.async copies issued so far by this thread."""

    name = "gpux.cp_async_commit"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class CpAsyncWaitOp(IRDLOperation):
    """Waits until at most ``pending`` committed groups are still in flight."""

    name = "gpux.cp_async_wait"

    pending = prop_def(IntegerAttr[I64])
    assembly_format = "$pending attr-dict"

    def __init__(self, pending: int):
        super().__init__(properties={"pending": IntegerAttr(pending, 64)})


@irdl_op_definition
class CopyOp(IndexedCopyOperation):
    """Synchronous copy of ``count`` contiguous elements, converting types.

    Lowers to 16-byte vector loads and stores where the count and element
    types allow; it is how tiles are written back to device memory.
    """

    name = "gpux.copy"

    SIZE: ClassVar[str] = "count"
    count = prop_def(IntegerAttr[I64])

    assembly_format = _copy_format(SIZE)

    def verify_(self) -> None:
        super().verify_()
        if self.count.value.data not in (1, 2, 4, 8):
            raise VerifyException(f"'{self.name}' copies 1, 2, 4 or 8 elements")


@irdl_op_definition
class LdmatrixOp(IRDLOperation):
    """``ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16``.

    Each lane passes the address of one matrix row (lanes 8i..8i+7 address the
    rows of matrix i); lane l receives row l/4, columns 2(l%4)..+1 of each
    matrix (of the transpose with ``trans``).
    """

    name = "gpux.ldmatrix"

    src = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    num = prop_def(IntegerAttr[I64])
    trans = prop_def(BoolAttr)
    result = result_def(VectorType)

    assembly_format = (
        "$src `[` $indices `]` `x` $num `trans` $trans attr-dict `:` "
        "type($src) `->` type($result)"
    )

    def __init__(
        self, src: SSAValue, indices: Sequence[SSAValue], num: int, trans: bool
    ):
        super().__init__(
            operands=[src, list(indices)],
            result_types=[fragment(src.type.element_type, 2 * num)],  # type: ignore[attr-defined]
            properties={
                "num": IntegerAttr(num, 64),
                "trans": BoolAttr.from_bool(trans),
            },
        )

    def verify_(self) -> None:
        _check_indices(self, self.src, self.indices)
        if not is_shared(self.src):
            raise VerifyException(f"'{self.name}' reads shared memory")
        element = self.src.type.element_type  # type: ignore[attr-defined]
        if not is_mma_operand(element):
            raise VerifyException(f"'{self.name}' loads f16 or bf16 matrices")
        num = self.num.value.data
        if num not in (1, 2, 4):
            raise VerifyException(f"'{self.name}' loads 1, 2 or 4 matrices")
        if self.result.type != fragment(element, 2 * num):
            raise VerifyException(
                f"'{self.name}' result must be vector<{2 * num}x{element}>"
            )


@irdl_op_definition
class MmaOp(IRDLOperation):
    """``mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32``: D = A·B + C.

    ``T`` is f16 or bf16, the same for A (``vector<8xT>``) and B
    (``vector<4xT>``); C and D are fp32 either way.
    """

    name = "gpux.mma"

    a = operand_def(VectorType)
    b = operand_def(VectorType)
    c = operand_def(MMA_C)
    result = result_def(MMA_C)

    assembly_format = "$a `,` $b `,` $c attr-dict `:` type($a) `,` type($b) `,` type($c) `->` type($result)"

    def __init__(self, a: SSAValue, b: SSAValue, c: SSAValue):
        super().__init__(operands=[a, b, c], result_types=[MMA_C])

    def verify_(self) -> None:
        element = self.a.type.element_type  # type: ignore[attr-defined]
        if not is_mma_operand(element):
            raise VerifyException(f"'{self.name}' multiplies f16 or bf16 fragments")
        if self.a.type != fragment(element, 8) or self.b.type != fragment(element, 4):
            raise VerifyException(
                f"'{self.name}' operands must be vector<8x{element}> and "
                f"vector<4x{element}>"
            )


@irdl_op_definition
class ShflXorOp(IRDLOperation):
    """``__shfl_xor_sync(0xffffffff, value, mask)``: the value of lane ``lane ^ mask``."""

    name = "gpux.shfl_xor"

    value = operand_def(Float32Type)
    mask = prop_def(IntegerAttr[I64])
    result = result_def(Float32Type)

    assembly_format = "$value `,` $mask attr-dict `:` type($value)"

    def __init__(self, value: SSAValue, mask: int):
        super().__init__(
            operands=[value],
            result_types=[f32],
            properties={"mask": IntegerAttr(mask, 64)},
        )

    def verify_(self) -> None:
        if not 0 < self.mask.value.data < 32:
            raise VerifyException(f"'{self.name}' mask must be in 1..31")


GPUX = Dialect(
    "gpux",
    [
        SharedAllocOp,
        CpAsyncOp,
        CpAsyncCommitOp,
        CpAsyncWaitOp,
        CopyOp,
        LdmatrixOp,
        MmaOp,
        ShflXorOp,
    ],
    [MemorySpaceAttr],
)
