"""From a µGraph module to a :class:`GpuProgram`, and the ``cuda``/``ptx`` targets.

:func:`generate_program` runs whatever lowering the module still needs
(``default-customize`` for bare kernel ops, ``fuse-thread-graphs``,
``lower-to-gpu``) on a copy, prints every kernel as CUDA C and reads the
buffers and launches off the host function: its arguments are the inputs then
the outputs (the latter marked ``{mirage.output}``), each ``memref.alloc`` is
an intermediate, each ``memref.reinterpret_cast`` (a reshape or a contiguous
slice) another name for its source's buffer, from the cast's offset on, each
``gpu.launch_func`` a launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, memref
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import SSAValue
from xdsl.utils.target import Target

from mirage_xdsl.dialects import kernel
from mirage_xdsl.gpu_target import H100
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.lowering.cuda_printer import cuda_source, kernel_source
from mirage_xdsl.lowering.lower_to_gpu import OUTPUT_ATTR, LowerToGpuPass
from mirage_xdsl.lowering.program import BufferSpec, GpuProgram, KernelLaunch
from mirage_xdsl.semantics.interpreter import entry_function


def lowered(module: ModuleOp) -> ModuleOp:
    """A GPU-level copy of ``module``, lowering only what is not lowered yet."""
    if any(isinstance(op, gpu.ModuleOp) for op in module.ops):
        return module
    from mirage_xdsl.lowering.default_customize import customize_bare_ops
    from mirage_xdsl.lowering.fuse_thread_graphs import FuseThreadGraphsPass

    module = module.clone()
    ctx = make_context()
    customize_bare_ops(module, ctx)
    if any(isinstance(op, kernel.CustomizedOp) for op in module.walk()):
        FuseThreadGraphsPass().apply(ctx, module)
    LowerToGpuPass().apply(ctx, module)
    return module


def _int(value: SSAValue) -> int:
    owner = value.owner
    assert isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr)
    return owner.value.value.data


def _dtype(ty) -> str:
    assert isinstance(ty, MemRefType)
    return str(ty.element_type)


def program_of(module: ModuleOp, host: func.FuncOp) -> GpuProgram:
    kernels = {
        k.sym_name.data: k
        for m in module.ops
        if isinstance(m, gpu.ModuleOp)
        for k in m.body.block.ops
        if isinstance(k, gpu.FuncOp)
    }
    names: dict[SSAValue, str] = {}
    offsets: dict[SSAValue, int] = {}
    buffers: list[BufferSpec] = []
    counts = {"input": 0, "output": 0}
    attrs = host.arg_attrs.data if host.arg_attrs else [None] * len(host.args)
    for arg, attr in zip(host.args, attrs, strict=True):
        kind = "output" if attr is not None and OUTPUT_ATTR in attr.data else "input"
        index = counts[kind]
        counts[kind] += 1
        names[arg] = f"{kind}{index}"
        ty = arg.type
        assert isinstance(ty, MemRefType)
        buffers.append(
            BufferSpec(names[arg], tuple(ty.get_shape()), _dtype(ty), kind, index)
        )  # type: ignore[arg-type]
    launches: list[KernelLaunch] = []
    used: list[str] = []
    for op in host.body.block.ops:
        if isinstance(op, memref.AllocOp):
            names[op.memref] = f"tmp{len(buffers) - len(host.args)}"
            ty = op.memref.type
            buffers.append(
                BufferSpec(
                    names[op.memref],
                    tuple(ty.get_shape()),
                    _dtype(ty),
                    "intermediate",
                    -1,
                )
            )
        elif isinstance(op, memref.ReinterpretCastOp):
            names[op.result] = names[op.source]  # a view of the same buffer
            start = op.static_offsets.get_values()[0]
            offsets[op.result] = offsets.get(op.source, 0) + start
        elif isinstance(op, gpu.LaunchFuncOp):
            name = op.kernel.nested_references.data[-1].data
            used.append(name)
            shared = op.dynamicSharedMemorySize
            launches.append(
                KernelLaunch(
                    name=name,
                    grid=(_int(op.gridSizeX), _int(op.gridSizeY), _int(op.gridSizeZ)),
                    block=(
                        _int(op.blockSizeX),
                        _int(op.blockSizeY),
                        _int(op.blockSizeZ),
                    ),
                    shared_bytes=_int(shared) if shared is not None else 0,
                    args=tuple(names[v] for v in op.kernelOperands),
                    offsets=tuple(offsets.get(v, 0) for v in op.kernelOperands),
                )
            )
    source = cuda_source([kernel_source(kernels[n]) for n in used])
    return GpuProgram(host.sym_name.data, source, tuple(buffers), tuple(launches))


def host_function(module: ModuleOp, function: str | None) -> func.FuncOp:
    """The function to lower, chosen as the interpreter chooses what to run."""
    try:
        return entry_function(module, function)
    except ValueError:
        raise MirageError(
            f"error: no function {function or ''} to lower".replace("  ", " ")
        ) from None


def generate_program(module: ModuleOp, function: str | None = None) -> GpuProgram:
    """Lower ``module`` as needed and return ``function``'s CUDA program."""
    gpu_module = lowered(module)
    return program_of(gpu_module, host_function(gpu_module, function))


def generate_source(module: ModuleOp) -> str:
    """CUDA C of every kernel of the module (all functions)."""
    gpu_module = lowered(module)
    kernels = [
        k
        for m in gpu_module.ops
        if isinstance(m, gpu.ModuleOp)
        for k in m.body.block.ops
        if isinstance(k, gpu.FuncOp)
    ]
    return cuda_source([kernel_source(k) for k in kernels])


@dataclass(frozen=True)
class CudaTarget(Target):
    """CUDA C of the module's kernels (lowering first what is not yet lowered)."""

    name = "cuda"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(generate_source(module))


@dataclass(frozen=True)
class PtxTarget(Target):
    """PTX of the module's kernels for ``arch`` (default sm_90), through NVRTC."""

    name = "ptx"

    arch: str = H100.arch

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from mirage_xdsl.lowering.nvrtc import compile_cuda

        output.write(compile_cuda(generate_source(module), arch=self.arch).ptx)
