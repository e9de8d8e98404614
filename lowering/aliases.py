"""Which values of a function share one device buffer: ``kernel.reshape``.

A row-major reshape moves nothing in device memory, so it is no kernel: its
result is its operand's buffer seen with another shape. That is exact for the
contiguous row-major buffers both backends use, since every kernel indexes a
buffer by its own operand's shape.

A value's *storage* is the root of its chain of reshapes: a function argument
or a kernel's result. Every value of one chain lives in the storage's buffer.
A returned value gives its storage the output buffer, so the kernel making the
storage writes the output directly, even when what is returned is a reshape
of it. Both backends plan their buffers from :func:`storage_of` and
:func:`output_storage`.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.diagnostics import MirageError


def is_alias(op: Operation) -> bool:
    """Whether ``op`` is lowered as a buffer alias, with no kernel."""
    return isinstance(op, t.TensorOp) and op.KIND == "reshape"


def storage_of(fn: func.FuncOp) -> dict[SSAValue, SSAValue]:
    """The storage of every value of ``fn``: itself unless a reshape made it."""
    body = fn.body.block
    storage: dict[SSAValue, SSAValue] = {a: a for a in body.args}
    for op in body.ops:
        for r in op.results:
            storage[r] = storage[op.operands[0]] if is_alias(op) else r
    return storage


def output_storage(
    fn: func.FuncOp, storage: dict[SSAValue, SSAValue], context: str, why: str
) -> dict[SSAValue, int]:
    """The output index each returned value's storage is written to.

    An output that no kernel would write is refused with one line starting
    ``error: {context}@name returns``, and ``why`` after it: a returned input,
    a returned reshape of an input, and two outputs of one storage (a value
    returned twice, or two of its reshapes: one kernel writes one buffer).
    """
    body = fn.body.block
    ret = body.last_op
    assert isinstance(ret, func.ReturnOp)
    out: dict[SSAValue, int] = {}
    for j, value in enumerate(ret.operands):
        root = storage[value]
        problem = None
        if value in body.args:
            problem = "an input unchanged"
        elif root in body.args:
            problem = "a reshape of an input, which moves nothing"
        elif root in out:
            same = value == ret.operands[out[root]]
            problem = "one value twice" if same else "two views of one value"
        if problem:
            raise MirageError(
                f"error: {context}@{fn.sym_name.data} returns {problem}; {why}"
            )
        out[root] = j
    return out
