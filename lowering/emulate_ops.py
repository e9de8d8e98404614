"""How the emulator runs each op of the GPU-level IR, lane by lane.

Every rule takes the emulator (:class:`LaneEnv`), the op and the mask of
active lanes, and sets the op's result: one numpy array over all lanes.
Arithmetic runs on every lane (inactive lanes compute on placeholders whose
results are dropped); ``scf.for`` runs while any lane is inside its bounds,
each lane only while inside its own, and ``scf.if`` narrows the mask.
Memory ops go through :meth:`Launch.read` and :meth:`Launch.write`, which
check for races; ``cp.async`` copies land only when ``cp.async.wait_group``
retires their group, and ``gpu.barrier`` starts a new epoch (outside
divergent code only). The warp-collective ops follow the PTX ISA in
``emulate_warp.py``.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith, gpu, math, memref, scf, vector
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    MemRefType,
)
from xdsl.ir import Operation

from mirage_xdsl.dialects import gpux
from mirage_xdsl.lowering.cuda_printer import strides_of
from mirage_xdsl.lowering.emulate_state import (
    EmulationError,
    LaneEnv,
    SharedRef,
    as_lanes,
    np_dtype,
    round_bf16,
)
from mirage_xdsl.lowering.emulate_warp import ldmatrix, mma, shfl_xor
from mirage_xdsl.ops import MATH


def _constant(e: LaneEnv, op: arith.ConstantOp, mask) -> None:
    v = op.value
    if isinstance(v, IntegerAttr):
        e.set(op, np.int64(v.value.data))
    elif isinstance(v, FloatAttr):
        e.set(op, np.float32(v.value.data))
    elif isinstance(v, DenseIntOrFPElementsAttr):
        n = op.result.type.get_shape()[0]  # type: ignore[union-attr]
        e.set(op, np.zeros((e.state.lanes, n), np.float32))
    else:
        raise NotImplementedError(str(v))


def _binary(fn):
    def run(e: LaneEnv, op: Operation, mask) -> None:
        e.set(op, fn(e[op.operands[0]], e[op.operands[1]]))

    return run


def _unary(fn):
    def run(e: LaneEnv, op: Operation, mask) -> None:
        e.set(op, fn(e[op.operands[0]]))

    return run


def _math(fn):
    """A scalar function of :data:`ops.MATH`, in f32."""
    return _unary(lambda x: fn(np.asarray(x, np.float32)))


CMPF = {
    1: np.equal,
    2: np.greater,
    3: np.greater_equal,
    4: np.less,
    5: np.less_equal,
    6: np.not_equal,
}
"""The ordered ``arith.cmpf`` predicates (``oeq`` ... ``one``)."""

CMP = {
    0: np.equal,
    1: np.not_equal,
    6: np.less,
    7: np.less_equal,
    8: np.greater,
    9: np.greater_equal,
    2: np.less,
    3: np.less_equal,
    4: np.greater,
    5: np.greater_equal,
}


def _safe_div(a, b):
    return np.floor_divide(a, b)


def _truncf(e: LaneEnv, op: arith.TruncFOp, mask) -> None:
    """f32 rounded to nearest even: to f16 by numpy, to bf16 by its bits."""
    x = e[op.input]
    if isinstance(op.result.type, BFloat16Type):
        e.set(op, round_bf16(x))
    else:
        e.set(op, np.asarray(x, np.float16))


def _for(e: LaneEnv, op: scf.ForOp, mask) -> None:
    lb, ub, step = e[op.lb], e[op.ub], e[op.step]
    iv_arg, *carried = op.body.block.args
    values = [e[v] for v in op.iter_args]
    k = 0
    while True:
        iv = lb + k * step
        active = mask & (np.asarray(iv) < ub)
        if not np.any(active):
            break
        e.values[iv_arg] = as_lanes(e, iv)
        for arg, value in zip(carried, values, strict=True):
            e.values[arg] = value
        e.block(op.body.block, active)
        term = op.body.block.last_op
        new = [e[v] for v in term.operands]  # type: ignore[union-attr]
        values = [
            np.where(active.reshape(-1, *([1] * (np.ndim(n) - 1))), n, o)
            if np.ndim(n) or np.ndim(o)
            else n
            for n, o in zip(new, values, strict=True)
        ]
        k += 1
    for r, value in zip(op.res, values, strict=True):
        e.values[r] = value


def _if(e: LaneEnv, op: scf.IfOp, mask) -> None:
    active = mask & np.asarray(e[op.cond], bool)
    if np.any(active):
        e.block(op.true_region.block, active)


def _load(e: LaneEnv, op: memref.LoadOp, mask) -> None:
    ref = e[op.memref]
    e.set(op, e.state.read(ref, e.linear(ref, op.indices), mask)[:, 0])


def _store(e: LaneEnv, op: memref.StoreOp, mask) -> None:
    ref = e[op.memref]
    value = as_lanes(e, e[op.value])
    e.state.write(ref, e.linear(ref, op.indices), value[:, None], mask)


def _shared_alloc(e: LaneEnv, op: gpux.SharedAllocOp, mask) -> None:
    ty = op.result.type
    assert isinstance(ty, MemRefType)
    e.set(
        op, SharedRef(op.offset.value.data, np_dtype(ty.element_type), strides_of(ty))
    )


def _cp_async(e: LaneEnv, op: gpux.CpAsyncOp, mask) -> None:
    src, dst = e[op.src], e[op.dst]
    count = op.bytes.value.data // np.dtype(dst.dtype).itemsize
    data = e.state.read(src, e.linear(src, op.src_indices), mask, count)
    e.state.pending.append((dst, e.linear(dst, op.dst_indices), data, mask.copy()))


def _commit(e: LaneEnv, op, mask) -> None:
    e.state.groups.append(e.state.pending)
    e.state.pending = []


def _wait(e: LaneEnv, op: gpux.CpAsyncWaitOp, mask) -> None:
    keep = op.pending.value.data
    st = e.state
    while len(st.groups) > keep:
        for dst, lin, data, m in st.groups.pop(0):
            st.write(dst, lin, data, m)


def _copy(e: LaneEnv, op: gpux.CopyOp, mask) -> None:
    src, dst = e[op.src], e[op.dst]
    count = op.count.value.data
    data = e.state.read(src, e.linear(src, op.src_indices), mask, count)
    e.state.write(dst, e.linear(dst, op.dst_indices), data.astype(np.float32), mask)


def _barrier(e: LaneEnv, op, mask) -> None:
    if not np.all(mask):
        raise EmulationError("__syncthreads in divergent code")
    e.state.epoch += 1


def _extract(e: LaneEnv, op: vector.ExtractOp, mask) -> None:
    (pos,) = op.static_position.get_values()
    e.set(op, np.asarray(e[op.vector])[:, pos])


def _id(e: LaneEnv, op, mask) -> None:
    dim = op.dimension.data.value
    source = e.thread_xyz if isinstance(op, gpu.ThreadIdOp) else e.state.block_ids
    e.set(op, source[dim])


HANDLERS = {
    arith.ConstantOp: _constant,
    arith.AddiOp: _binary(np.add),
    arith.MuliOp: _binary(np.multiply),
    arith.DivUIOp: _binary(_safe_div),
    arith.RemUIOp: _binary(np.remainder),
    arith.MinUIOp: _binary(np.minimum),
    arith.CmpiOp: lambda e, op, m: e.set(
        op, CMP[op.predicate.value.data](e[op.lhs], e[op.rhs])
    ),
    arith.CmpfOp: lambda e, op, m: e.set(
        op, CMPF[op.predicate.value.data](e[op.lhs], e[op.rhs])
    ),
    arith.SelectOp: lambda e, op, m: e.set(
        op, np.where(e[op.cond], e[op.lhs], e[op.rhs])
    ),
    arith.AddfOp: _binary(lambda a, b: np.float32(a) + np.float32(b)),
    arith.SubfOp: _binary(lambda a, b: np.float32(a) - np.float32(b)),
    arith.MulfOp: _binary(lambda a, b: np.float32(a) * np.float32(b)),
    arith.DivfOp: _binary(lambda a, b: np.float32(a) / np.float32(b)),
    arith.NegfOp: _unary(np.negative),
    arith.ExtFOp: _unary(lambda x: np.asarray(x, np.float32)),
    arith.TruncFOp: _truncf,
    **{getattr(math, f.xdsl_op): _math(f.real) for f in MATH.values()},
    arith.MaximumfOp: _binary(lambda a, b: np.maximum(np.float32(a), np.float32(b))),
    memref.LoadOp: _load,
    memref.StoreOp: _store,
    vector.ExtractOp: _extract,
    scf.ForOp: _for,
    scf.IfOp: _if,
    scf.YieldOp: lambda e, op, m: None,
    gpu.ThreadIdOp: _id,
    gpu.BlockIdOp: _id,
    gpu.BarrierOp: _barrier,
    gpu.ReturnOp: lambda e, op, m: None,
    gpux.SharedAllocOp: _shared_alloc,
    gpux.CpAsyncOp: _cp_async,
    gpux.CpAsyncCommitOp: _commit,
    gpux.CpAsyncWaitOp: _wait,
    gpux.CopyOp: _copy,
    gpux.LdmatrixOp: ldmatrix,
    gpux.MmaOp: mma,
    gpux.ShflXorOp: shfl_xor,
}
"""The rule for each op type (the ``math`` ops: their :data:`ops.MATH`
function); the emulator refuses any op not here."""
