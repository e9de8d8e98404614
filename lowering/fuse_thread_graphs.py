"""``fuse-thread-graphs``: fuse element-wise chains of a block graph into thread graphs.

Every block-level op is a pass over shared memory: it reads its operand tiles
and writes its result tile. A chain of element-wise ops (``exp``, ``mul``,
``silu``, ...) does not need those intermediate tiles: each thread can load its
elements once, apply the whole chain in registers and store the result. This
pass finds such chains by rule, as the original project does (no search):

- an element-wise block op whose result has exactly one user, which is an
  element-wise op of the same for-loop phase, joins its user's group;
- each group of two or more ops becomes one ``block.thread_graph`` holding the
  same computation as ``thread.*`` ops, with the group's outside operands as
  inputs and its root as the single result.

Reductions, matmuls, ``rms_norm``, concatenations and accumulators stay block
ops: they need data from other threads.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from mirage_xdsl.dialects import block, kernel, thread
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import phases_of
from mirage_xdsl.ir.regions import outside_operands


def fusible(op: Operation) -> bool:
    return (
        isinstance(op, t.TensorOp)
        and op.name.startswith("block.")
        and op.KIND in thread.ELEMENTWISE_OPS
    )


def groups_of(customized: kernel.CustomizedOp) -> list[list[Operation]]:
    """Maximal single-use element-wise trees, each in program order."""
    phases = phases_of(customized)
    group: dict[Operation, list[Operation]] = {}
    for op in customized.entry.ops:
        if not fusible(op):
            continue
        members = [op]
        for v in op.operands:
            producer = v.owner
            if (
                isinstance(producer, Operation)
                and producer in group
                and v.has_one_use()
                and phases[v] == phases[op.results[0]]
            ):
                members = group.pop(producer) + members
        group[op] = members
    return [sorted(g, key=customized.entry.get_operation_index) for g in group.values()]


def fuse(members: list[Operation]) -> block.ThreadGraphOp:
    """Replace a group by one thread graph computing its root."""
    root = members[-1]
    inputs = outside_operands(members)
    body = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args, strict=True))
    for op in members:
        new = thread.ELEMENTWISE_OPS[op.KIND](  # type: ignore[attr-defined]
            *[mapping[v] for v in op.operands],
            *op.constant_args(),  # type: ignore[attr-defined]
        )
        body.add_op(new)
        mapping[op.results[0]] = new.results[0]
    body.add_op(thread.YieldOp([mapping[root.results[0]]]))
    graph = block.ThreadGraphOp(inputs, [root.results[0].type], Region(body))
    Rewriter.insert_op(graph, InsertPoint.before(root))
    root.results[0].replace_all_uses_with(graph.outputs[0])
    for op in reversed(members):
        op.detach()
        op.erase()
    return graph


@dataclass(frozen=True)
class FuseThreadGraphsPass(ModulePass):
    """Fuse element-wise chains in block graphs into ``block.thread_graph`` regions.

    An element-wise block op whose only user is an element-wise op of the same
    for-loop phase is fused into that user; every group of two or more ops
    becomes a thread graph of ``thread.*`` ops, so the chain runs in registers
    with one pass over shared memory.
    """

    name = "fuse-thread-graphs"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for customized in [o for o in op.walk() if isinstance(o, kernel.CustomizedOp)]:
            for members in groups_of(customized):
                if len(members) > 1:
                    fuse(members)
