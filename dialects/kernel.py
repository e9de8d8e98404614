"""The kernel dialect: the top level of a µGraph.

Values are tensors in device memory (builtin ``tensor<...>`` types). A program
written only with the library-style ops below (``kernel.matmul``,
``kernel.exp``, ...) is the input to the superoptimizer. A program made of
``kernel.customized`` ops, each a graph-defined GPU kernel whose region is a
block-level graph, is what the search produces.

Example::

    %a = kernel.matmul %q, %k : tensor<2x256x64xf16>, tensor<2x64x4096xf16>
                                -> tensor<2x256x4096xf16>
    %e = kernel.exp %a : tensor<2x256x4096xf16> -> tensor<2x256x4096xf16>
    %s = kernel.reduce_sum %e dim 2 : tensor<2x256x4096xf16> -> tensor<2x256x1xf16>
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr, TensorType, i64
from xdsl.ir import Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import NoTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import OpVerifyError, verify_customized
from mirage_xdsl.gpu_target import H100


@irdl_op_definition
class MatmulOp(t.MatmulBase):
    """Batched matmul of device tensors: ``[..., m, k] x [..., k, n]``."""

    name = "kernel.matmul"
    traits = traits_def(Pure())


@irdl_op_definition
class RmsNormOp(t.RmsNormBase):
    name = "kernel.rms_norm"
    traits = traits_def(Pure())


@irdl_op_definition
class ReduceSumOp(t.ReduceSumBase):
    name = "kernel.reduce_sum"
    traits = traits_def(Pure())


@irdl_op_definition
class ReduceMaxOp(t.ReduceMaxBase):
    name = "kernel.reduce_max"
    traits = traits_def(Pure())


@irdl_op_definition
class TransposeOp(t.TransposeBase):
    name = "kernel.transpose"
    traits = traits_def(Pure())


@irdl_op_definition
class ReshapeOp(t.ReshapeBase):
    name = "kernel.reshape"
    traits = traits_def(Pure())


@irdl_op_definition
class SliceOp(t.SliceBase):
    name = "kernel.slice"
    traits = traits_def(Pure())


@irdl_op_definition
class ConcatOp(t.ConcatBase):
    name = "kernel.concat"
    traits = traits_def(Pure())


@irdl_op_definition
class CastOp(t.CastBase):
    name = "kernel.cast"
    traits = traits_def(Pure())


@irdl_op_definition
class BroadcastOp(t.BroadcastBase):
    name = "kernel.broadcast"
    traits = traits_def(Pure())


@irdl_op_definition
class AllReduceOp(IRDLOperation):
    """Sum over the shards of a tensor-parallel program: each of the ``shards``
    copies of the program contributes its value of ``input`` and receives the
    sum of all of them.

    A kernel boundary, not arithmetic of one shard: the search keeps it as it
    is between the segments it searches, and the runtime runs it as a
    collective (NCCL through ``torch.distributed``) between kernels.
    """

    name = "kernel.all_reduce"

    input = operand_def(TensorType)
    shards = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)

    assembly_format = (
        "$input `shards` $shards attr-dict `:` type($input) `->` type($result)"
    )

    def __init__(self, input: SSAValue | Operation, shards: int):
        input = SSAValue.get(input)
        super().__init__(
            operands=[input],
            properties={"shards": IntegerAttr(shards, 64)},
            result_types=[input.type],
        )

    @property
    def group_size(self) -> int:
        """How many shards the sum runs over."""
        return self.shards.value.data

    def verify_(self) -> None:
        t.check_float_tensors(self)
        if self.input.type != self.result.type:
            raise VerifyException(
                f"'{self.name}' result type {self.result.type} must equal the "
                f"input type {self.input.type}"
            )
        if self.group_size < 1:
            raise VerifyException(
                f"'{self.name}' shards must be >= 1, got {self.group_size}"
            )


def dense_i64(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


@irdl_op_definition
class CustomizedOp(IRDLOperation):
    """A graph-defined kernel: one GPU launch whose body is a block graph.

    ``grid`` is the number of thread blocks along x, y, z; ``block`` the
    threads per block; ``forloop_range`` how many iterations each block runs.
    The region's arguments are the kernel's device-tensor inputs, and its
    ``block.output`` ops, in order, define the results.
    """

    name = "kernel.customized"

    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    grid = prop_def(DenseArrayBase[I64])
    block = prop_def(DenseArrayBase[I64])
    forloop_range = prop_def(IntegerAttr[I64])
    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    assembly_format = (
        "`(` $inputs `)` `grid` $grid `block` $block `forloop` $forloop_range "
        "attr-dict `:` functional-type($inputs, $outputs) $body"
    )

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        output_types: Sequence[TensorType],
        body: Region,
        grid: Sequence[int],
        block: Sequence[int] = (128, 1, 1),
        forloop_range: int = 1,
    ):
        super().__init__(
            operands=[list(inputs)],
            result_types=[list(output_types)],
            properties={
                "grid": dense_i64(grid),
                "block": dense_i64(block),
                "forloop_range": IntegerAttr(forloop_range, 64),
            },
            regions=[body],
        )

    @property
    def grid_dims(self) -> tuple[int, ...]:
        return tuple(self.grid.get_values())

    @property
    def block_dims(self) -> tuple[int, ...]:
        return tuple(self.block.get_values())

    @property
    def forloop(self) -> int:
        return self.forloop_range.value.data

    @property
    def entry(self) -> Block:
        return self.body.block

    def verify_launch(self) -> None:
        """Check grid, block and for-loop range, which every inner op relies on.

        Inner ops verify first and read the grid, so they call this before
        using it; the error is reported at this op either way.
        """
        grid, block = self.grid_dims, self.block_dims
        if len(grid) != 3 or any(g < 1 for g in grid):
            raise OpVerifyError(
                self,
                f"'{self.name}' grid must be three positive sizes, got {list(grid)}",
            )
        if len(block) != 3 or any(b < 1 for b in block):
            raise OpVerifyError(
                self,
                f"'{self.name}' block must be three positive sizes, got {list(block)}",
            )
        threads = block[0] * block[1] * block[2]
        most, warp = H100.max_threads_per_block, H100.warp_size
        if threads > most or threads % warp:
            raise OpVerifyError(
                self,
                f"'{self.name}' block has {threads} threads; it needs a multiple "
                f"of {warp} and at most {most}",
            )
        if self.forloop < 1:
            raise OpVerifyError(self, f"'{self.name}' forloop range must be >= 1")

    def verify_(self) -> None:
        self.verify_launch()
        args = self.entry.args
        if [a.type for a in args] != [v.type for v in self.inputs]:
            raise VerifyException(
                f"'{self.name}' region arguments must match the input types"
            )
        verify_customized(self)


ELEMENTWISE_OPS = t.elementwise_ops("kernel", traits_def(Pure()))
"""The element-wise ops of the op table on device tensors, by kind."""
globals().update({cls.__name__: cls for cls in ELEMENTWISE_OPS.values()})


Kernel = Dialect(
    "kernel",
    [
        MatmulOp,
        *ELEMENTWISE_OPS.values(),
        RmsNormOp,
        ReduceSumOp,
        ReduceMaxOp,
        TransposeOp,
        ReshapeOp,
        SliceOp,
        ConcatOp,
        BroadcastOp,
        CastOp,
        AllReduceOp,
        CustomizedOp,
    ],
    [],
)
