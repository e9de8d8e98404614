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
class YieldOp(IRDLOperation):
    """Returns the thread graph's results to the enclosing block graph."""

    name = "thread.yield"

    values = var_operand_def(TensorType)

    assembly_format = "$values attr-dict `:` type($values)"

    traits = traits_def(IsTerminator(), IN_THREAD_GRAPH, Pure())

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[list(values)])


ELEMENTWISE_OPS = t.elementwise_ops("thread", traits_def(Pure(), IN_THREAD_GRAPH))
"""The element-wise ops of the op table on register values, by kind."""
globals().update({cls.__name__: cls for cls in ELEMENTWISE_OPS.values()})


Thread = Dialect(
    "thread",
    [
        *ELEMENTWISE_OPS.values(),
        YieldOp,
    ],
    [],
)
