"""Cutting a group of ops out into a region of its own.

Both the segment search (``search/partition.py``, a run of kernel ops becomes
a function) and thread-graph fusion (``lowering/fuse_thread_graphs.py``, a
chain of block ops becomes a ``block.thread_graph``) move ops into a new
region, whose block arguments are what the ops read from outside the group.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue


def outside_operands(ops: Sequence[Operation]) -> list[SSAValue]:
    """The values ``ops`` read that none of them defines, each once, in the
    order of first use: the arguments of a region computing them."""
    inside = {r for op in ops for r in op.results}
    inputs: list[SSAValue] = []
    for op in ops:
        for v in op.operands:
            if v not in inside and v not in inputs:
                inputs.append(v)
    return inputs
