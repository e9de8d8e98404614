"""CUDA C for the GPU-level IR: one ``extern "C" __global__`` function per kernel.

Every SSA value becomes a ``const`` local (constants are printed inline),
``scf.for`` a C ``for`` loop whose carried values are mutable locals,
``scf.if`` an ``if``, memref accesses pointer arithmetic over the memref's
static strides. The ``gpux`` ops print as calls into the prelude
(``cuda_prelude.cuh``: inline PTX for ``cp.async``, ``ldmatrix``,
``mma.sync``). ``PRINTERS`` maps each op class to its printer, one short
function each, in the manner of xDSL's interpreter tables. bf16 values are
``mx_bf16`` (their 16 bits) and convert through ``mx_bf2f``/``mx_f2bf``; their
prelude (``cuda_prelude_bf16.cuh``) is added only to sources that use it, so
f16 and f32 programs print as they always have.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from xdsl.dialects import arith, gpu, math, memref, scf, vector
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StridedLayoutAttr,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from mirage_xdsl.dialects import gpux
from mirage_xdsl.ops import MATH

PRELUDE = (Path(__file__).parent / "cuda_prelude.cuh").read_text()
BF16_PRELUDE = (Path(__file__).parent / "cuda_prelude_bf16.cuh").read_text()
BF16_NAMES = "mx_bf"
"""Every name the bf16 prelude defines starts so; a kernel source using any
needs that prelude."""

UNROLL_LIMIT = 16
"""Loops with constant bounds and at most this many trips are fully unrolled,
so fragment arrays stay in registers."""


def c_type(ty: Attribute) -> str:
    if isinstance(ty, IndexType | IntegerType):
        return "bool" if isinstance(ty, IntegerType) and ty.width.data == 1 else "int"
    if isinstance(ty, Float32Type):
        return "float"
    if isinstance(ty, Float16Type):
        return "__half"
    if isinstance(ty, BFloat16Type):
        return "mx_bf16"
    if isinstance(ty, VectorType):
        lanes = ty.get_shape()[0]
        if isinstance(ty.element_type, Float16Type):
            return f"mx_f16x{lanes}"
        if isinstance(ty.element_type, BFloat16Type):
            return f"mx_bf16x{lanes}"
        return f"mx_f32x{lanes}"
    if isinstance(ty, MemRefType):
        return c_type(ty.element_type) + "*"
    raise NotImplementedError(f"no C type for {ty}")


def strides_of(ty: MemRefType) -> list[int]:
    if isinstance(ty.layout, StridedLayoutAttr):
        return [s.data for s in ty.layout.strides.data]  # type: ignore[union-attr]
    shape = ty.get_shape()
    out, step = [], 1
    for size in reversed(shape):
        out.append(step)
        step *= size
    return out[::-1]


class CudaPrinter:
    """Prints ``gpu.func`` kernels as CUDA C."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[SSAValue, str] = {}
        self.depth = 0
        self.counter = 0

    # --- naming and emission -------------------------------------------

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def fresh(self, value: SSAValue, prefix: str = "v") -> str:
        name = f"{prefix}{self.counter}"
        self.counter += 1
        self.names[value] = name
        return name

    def __getitem__(self, value: SSAValue) -> str:
        return self.names[value]

    def define(self, op: Operation, expr: str) -> None:
        result = op.results[0]
        name = self.fresh(result)
        ty = c_type(result.type)
        decl = f"{ty} const" if ty.endswith("*") else f"const {ty}"
        self.emit(f"{decl} {name} = {expr};")

    def address(self, ref: SSAValue, indices) -> str:
        assert isinstance(ref.type, MemRefType)
        terms = [
            f"{self[i]} * {s}" if s != 1 else self[i]
            for i, s in zip(indices, strides_of(ref.type), strict=True)
            if self[i] != "0"
        ]
        return f"{self[ref]}[{' + '.join(terms) or '0'}]"

    def pointer(self, ref: SSAValue, indices) -> str:
        return f"&{self.address(ref, indices)}"

    # --- kernels ---------------------------------------------------------

    def kernel(self, fn: gpu.FuncOp) -> str:
        self.lines = []
        block = fn.body.block
        written = {
            o.operands[1] if isinstance(o, memref.StoreOp) else o.operands[0]
            for o in fn.walk()
            if isinstance(o, memref.StoreOp | gpux.CopyOp)
        }
        params = []
        for i, arg in enumerate(block.args):
            name = self.fresh(arg, "arg")
            del i
            const = "" if arg in written else "const "
            params.append(f"{const}{c_type(arg.type)} __restrict__ {name}")
        threads = 1
        if fn.known_block_size is not None:
            for t in fn.known_block_size.get_values():
                threads *= t
        self.emit(
            f'extern "C" __global__ void __launch_bounds__({threads}) '
            f"{fn.sym_name.data}({', '.join(params)}) {{"
        )
        self.depth += 1
        self.block(block)
        self.depth -= 1
        self.emit("}")
        return "\n".join(self.lines)

    def block(self, block: Block) -> None:
        for op in block.ops:
            printer = PRINTERS.get(type(op))
            if printer is None:
                raise NotImplementedError(
                    f"the CUDA printer has no rule for '{op.name}'"
                )
            printer(self, op)

    # --- structured control flow -------------------------------------------

    def for_loop(self, op: scf.ForOp) -> None:
        iv, *carried = op.body.block.args
        for value, init, result in zip(carried, op.iter_args, op.res, strict=True):
            name = self.fresh(value, "c")
            self.names[result] = name
            self.emit(f"{c_type(value.type)} {name} = {self[init]};")
        lb, ub, step = self[op.lb], self[op.ub], self[op.step]
        if all(s.lstrip("-").isdigit() for s in (lb, ub, step)):
            trips = max(0, -(-(int(ub) - int(lb)) // int(step)))
            self.emit("#pragma unroll" if trips <= UNROLL_LIMIT else "#pragma unroll 1")
        name = self.fresh(iv, "i")
        self.emit(f"for (int {name} = {lb}; {name} < {ub}; {name} += {step}) {{")
        self.depth += 1
        self.block(op.body.block)
        self.depth -= 1
        self.emit("}")

    def yield_(self, op: scf.YieldOp) -> None:
        parent = op.parent_op()
        if not isinstance(parent, scf.ForOp) or not op.operands:
            return
        targets = [self[v] for v in parent.body.block.args[1:]]
        values = [self[v] for v in op.operands]
        if len(values) == 1:
            self.emit(f"{targets[0]} = {values[0]};")
            return
        temps = []
        for target, value, arg in zip(
            targets, values, parent.body.block.args[1:], strict=True
        ):
            temps.append((target, f"{target}_next"))
            self.emit(f"const {c_type(arg.type)} {target}_next = {value};")
        for target, temp in temps:
            self.emit(f"{target} = {temp};")

    def if_(self, op: scf.IfOp) -> None:
        self.emit(f"if ({self[op.cond]}) {{")
        self.depth += 1
        self.block(op.true_region.block)
        self.depth -= 1
        self.emit("}")


def _constant(p: CudaPrinter, op: arith.ConstantOp) -> None:
    value = op.value
    if isinstance(value, IntegerAttr):
        p.names[op.result] = str(value.value.data)
    elif isinstance(value, FloatAttr):
        p.names[op.result] = f"{float(value.value.data)!r}f"
    elif isinstance(value, DenseIntOrFPElementsAttr):
        p.names[op.result] = f"{c_type(op.result.type)}{{}}"
    else:
        raise NotImplementedError(f"constant {value}")


def _binary(symbol: str) -> Callable[[CudaPrinter, Operation], None]:
    def emit(p: CudaPrinter, op: Operation) -> None:
        p.define(op, f"{p[op.operands[0]]} {symbol} {p[op.operands[1]]}")

    return emit


def _call(fn: str) -> Callable[[CudaPrinter, Operation], None]:
    def emit(p: CudaPrinter, op: Operation) -> None:
        p.define(op, f"{fn}({', '.join(p[v] for v in op.operands)})")

    return emit


def _extf(p: CudaPrinter, op: arith.ExtFOp) -> None:
    """Widening to f32: the conversion of the source's 16-bit type."""
    fn = "mx_bf2f" if isinstance(op.input.type, BFloat16Type) else "mx_h2f"
    p.define(op, f"{fn}({p[op.input]})")


def _truncf(p: CudaPrinter, op: arith.TruncFOp) -> None:
    """Rounding f32 to the result's 16-bit type, to nearest even."""
    fn = "mx_f2bf" if isinstance(op.result.type, BFloat16Type) else "mx_f2h"
    p.define(op, f"{fn}({p[op.input]})")


def _cmpi(p: CudaPrinter, op: arith.CmpiOp) -> None:
    symbols = {
        0: "==",
        1: "!=",
        2: "<",
        3: "<=",
        4: ">",
        5: ">=",
        6: "<",
        7: "<=",
        8: ">",
        9: ">=",
    }
    p.define(op, f"{p[op.lhs]} {symbols[op.predicate.value.data]} {p[op.rhs]}")


CMPF = {1: "==", 2: ">", 3: ">=", 4: "<", 5: "<=", 6: "!="}
"""C comparisons of the ordered ``arith.cmpf`` predicates (``oeq`` ... ``one``)."""


def _cmpf(p: CudaPrinter, op: arith.CmpfOp) -> None:
    p.define(op, f"{p[op.lhs]} {CMPF[op.predicate.value.data]} {p[op.rhs]}")


def _select(p: CudaPrinter, op: arith.SelectOp) -> None:
    p.define(op, f"{p[op.cond]} ? {p[op.lhs]} : {p[op.rhs]}")


def _thread_id(p: CudaPrinter, op: gpu.ThreadIdOp | gpu.BlockIdOp) -> None:
    base = "threadIdx" if isinstance(op, gpu.ThreadIdOp) else "blockIdx"
    p.define(op, f"static_cast<int>({base}.{op.dimension.data.value})")


def _load(p: CudaPrinter, op: memref.LoadOp) -> None:
    p.define(op, p.address(op.memref, op.indices))


def _store(p: CudaPrinter, op: memref.StoreOp) -> None:
    p.emit(f"{p.address(op.memref, op.indices)} = {p[op.value]};")


def _shared_alloc(p: CudaPrinter, op: gpux.SharedAllocOp) -> None:
    ty = c_type(op.result.type)
    p.define(op, f"reinterpret_cast<{ty}>(mx_shared + {op.offset.value.data})")


def _cp_async(p: CudaPrinter, op: gpux.CpAsyncOp) -> None:
    dst = p.pointer(op.dst, op.dst_indices)
    src = p.pointer(op.src, op.src_indices)
    p.emit(f"mx_cp_async<{op.bytes.value.data}>({dst}, {src});")


def _copy(p: CudaPrinter, op: gpux.CopyOp) -> None:
    dst = p.pointer(op.dst, op.dst_indices)
    src = p.pointer(op.src, op.src_indices)
    p.emit(f"mx_copy<{op.count.value.data}>({dst}, {src});")


def _ldmatrix(p: CudaPrinter, op: gpux.LdmatrixOp) -> None:
    suffix = "_trans" if op.trans.value.data else ""
    p.define(
        op, f"mx_ldmatrix_x{op.num.value.data}{suffix}({p.pointer(op.src, op.indices)})"
    )


def _extract(p: CudaPrinter, op: vector.ExtractOp) -> None:
    (pos,) = op.static_position.get_values()
    p.define(op, f"{p[op.vector]}.v[{pos}]")


def _shfl(p: CudaPrinter, op: gpux.ShflXorOp) -> None:
    p.define(op, f"__shfl_xor_sync(0xffffffffu, {p[op.value]}, {op.mask.value.data})")


PRINTERS: dict[type[Operation], Callable[..., None]] = {
    arith.ConstantOp: _constant,
    arith.AddiOp: _binary("+"),
    arith.MuliOp: _binary("*"),
    arith.DivUIOp: _binary("/"),
    arith.RemUIOp: _binary("%"),
    arith.MinUIOp: _call("min"),
    arith.CmpiOp: _cmpi,
    arith.CmpfOp: _cmpf,
    arith.SelectOp: _select,
    arith.AddfOp: _binary("+"),
    arith.SubfOp: _binary("-"),
    arith.MulfOp: _binary("*"),
    arith.DivfOp: _binary("/"),
    arith.NegfOp: lambda p, op: p.define(op, f"-{p[op.operand]}"),
    arith.ExtFOp: _extf,
    arith.TruncFOp: _truncf,
    **{getattr(math, f.xdsl_op): _call(f.c) for f in MATH.values()},
    arith.MaximumfOp: _call("fmaxf"),
    memref.LoadOp: _load,
    memref.StoreOp: _store,
    vector.ExtractOp: _extract,
    scf.ForOp: CudaPrinter.for_loop,
    scf.IfOp: CudaPrinter.if_,
    scf.YieldOp: CudaPrinter.yield_,
    gpu.ThreadIdOp: _thread_id,
    gpu.BlockIdOp: _thread_id,
    gpu.BarrierOp: lambda p, op: p.emit("__syncthreads();"),
    gpu.ReturnOp: lambda p, op: None,
    gpux.SharedAllocOp: _shared_alloc,
    gpux.CpAsyncOp: _cp_async,
    gpux.CpAsyncCommitOp: lambda p, op: p.emit("mx_cp_async_commit();"),
    gpux.CpAsyncWaitOp: lambda p, op: p.emit(
        f"mx_cp_async_wait<{op.pending.value.data}>();"
    ),
    gpux.CopyOp: _copy,
    gpux.LdmatrixOp: _ldmatrix,
    gpux.MmaOp: _call("mx_mma"),
    gpux.ShflXorOp: _shfl,
}
"""C for each op of the GPU-level IR (the ``math`` ops: their :data:`ops.MATH`
function)."""


def kernel_source(fn: gpu.FuncOp) -> str:
    return CudaPrinter().kernel(fn)


def cuda_source(kernels: list[str]) -> str:
    """The whole translation unit: the prelude, then the kernels.

    The bf16 prelude comes only with kernels that use bf16, so the source of
    an f16 or f32 program stays what it was before bf16 existed.
    """
    body = "\n\n".join(kernels)
    prelude = PRELUDE + (BF16_PRELUDE if BF16_NAMES in body else "")
    return prelude + "\n" + body + "\n"
