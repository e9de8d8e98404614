"""Which values of a function share one device buffer: views that move nothing.

A row-major reshape moves nothing in device memory, so it is no kernel: its
result is its operand's buffer seen with another shape. A slice that is a
contiguous range of its operand (every dim before the sliced one of size 1:
``[1, 1, 3072] -> [1, 1, 2048]``, one token's part of a fused projection) is
no kernel either: its result is its operand's buffer from an element offset
on. Both are exact for the contiguous row-major buffers both backends use,
since every kernel indexes a buffer by its own operand's shape from the
pointer it is given. Any other slice is a copy kernel (``default-customize``).

A value's *storage* is the root of its chain of aliases: a function argument
or a kernel's result. Every value of one chain lives in the storage's buffer,
at its :func:`offsets_of` elements from the start. A returned value gives its
storage the output buffer, so the kernel making the storage writes the output
directly, even when what is returned is a reshape of it; a slice returned
(reshaped or not) is no alias, since a kernel must write the output buffer.
Both backends plan their buffers from :func:`storage_of`, :func:`offsets_of`
and :func:`output_storage`.
"""

from __future__ import annotations

from math import prod

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.diagnostics import MirageError


def is_alias(op: Operation) -> bool:
    """Whether ``op`` is lowered as a buffer alias, with no kernel: a reshape,
    or a contiguous slice that is not returned."""
    if isinstance(op, kernel.SliceOp):
        return is_contiguous_slice(op) and not _returned(op.result)
    return isinstance(op, t.TensorOp) and op.KIND == "reshape"


ALIGN_BYTES = 16
"""Where an alias may start: the Triton backend declares every pointer it
passes 16-byte aligned (``tt.divisibility``, so loads can be vectorised), and
an alias is passed as its buffer's pointer plus its offset."""


def is_contiguous_slice(op: kernel.SliceOp) -> bool:
    """Whether ``op``'s window is one contiguous range of its operand's
    row-major buffer (every dim before the sliced one has size 1) that starts
    :data:`ALIGN_BYTES`-aligned, as its operand does."""
    dim = op.window[0]
    bytes_in = alias_offset(op) * t.element_type(op.input).bitwidth // 8  # type: ignore[attr-defined]
    return prod(t.tensor_shape(op.input)[:dim]) == 1 and bytes_in % ALIGN_BYTES == 0


def _returned(value: SSAValue) -> bool:
    """Whether ``value`` is returned, itself or through reshapes."""
    for use in value.uses:
        user = use.operation
        if isinstance(user, func.ReturnOp):
            return True
        if isinstance(user, t.TensorOp) and user.KIND == "reshape":
            if _returned(user.results[0]):
                return True
    return False


def alias_offset(op: Operation) -> int:
    """Elements from the start of an alias's operand to its result's first
    element: 0 for a reshape, the window's start for a slice."""
    if not isinstance(op, kernel.SliceOp):
        return 0
    dim, start, _ = op.window
    return start * prod(t.tensor_shape(op.input)[dim + 1 :])


def storage_of(fn: func.FuncOp) -> dict[SSAValue, SSAValue]:
    """The storage of every value of ``fn``: itself unless an alias made it."""
    body = fn.body.block
    storage: dict[SSAValue, SSAValue] = {a: a for a in body.args}
    for op in body.ops:
        for r in op.results:
            storage[r] = storage[op.operands[0]] if is_alias(op) else r
    return storage


def offsets_of(fn: func.FuncOp) -> dict[SSAValue, int]:
    """Each value's first element in its storage's buffer (0 but for slices
    and the aliases made from them)."""
    body = fn.body.block
    offsets: dict[SSAValue, int] = {a: 0 for a in body.args}
    for op in body.ops:
        for r in op.results:
            offsets[r] = (
                offsets[op.operands[0]] + alias_offset(op) if is_alias(op) else 0
            )
    return offsets


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
