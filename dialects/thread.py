"""The thread dialect: element-wise ops one thread runs on register values.

Thread graphs live inside ``block.thread_graph``; they are built by rule-based
fusion of element-wise chains (see ``lowering/fuse_thread_graphs.py``), not by
search. Values keep their tile's tensor type so broadcasting stays explicit;
each thread handles the elements it owns.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Dialect, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    traits_def,
    var_operand_def,
)
from xdsl.traits import HasParent, IsTerminator, Pure

from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block import ThreadGraphOp

IN_THREAD_GRAPH = HasParent(ThreadGraphOp)
"""Every thread op lives directly in a ``block.thread_graph`` region."""


@irdl_op_definition
class AddOp(t.AddBase):
    name = "thread.add"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class MulOp(t.MulBase):
    name = "thread.mul"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class DivOp(t.DivBase):
    name = "thread.div"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class ExpOp(t.ExpBase):
    name = "thread.exp"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class SiluOp(t.SiluBase):
    name = "thread.silu"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class SqrtOp(t.SqrtBase):
    name = "thread.sqrt"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class SquareOp(t.SquareBase):
    name = "thread.square"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class MulScalarOp(t.MulScalarBase):
    name = "thread.mul_scalar"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class AddScalarOp(t.AddScalarBase):
    name = "thread.add_scalar"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class NegOp(t.NegBase):
    name = "thread.neg"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class ReluOp(t.ReluBase):
    name = "thread.relu"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class SigmoidOp(t.SigmoidBase):
    name = "thread.sigmoid"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class TanhOp(t.TanhBase):
    name = "thread.tanh"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class GeluOp(t.GeluBase):
    name = "thread.gelu"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class GeluErfOp(t.GeluErfBase):
    name = "thread.gelu_erf"
    traits = traits_def(Pure(), IN_THREAD_GRAPH)


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Returns the thread graph's results to the enclosing block graph."""

    name = "thread.yield"

    values = var_operand_def(TensorType)

    assembly_format = "$values attr-dict `:` type($values)"

    traits = traits_def(IsTerminator(), IN_THREAD_GRAPH, Pure())

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[list(values)])


Thread = Dialect(
    "thread",
    [
        AddOp,
        MulOp,
        DivOp,
        ExpOp,
        SiluOp,
        SqrtOp,
        SquareOp,
        MulScalarOp,
        AddScalarOp,
        NegOp,
        ReluOp,
        SigmoidOp,
        TanhOp,
        GeluOp,
        GeluErfOp,
        YieldOp,
    ],
    [],
)
