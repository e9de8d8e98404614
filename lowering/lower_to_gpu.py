"""``lower-to-gpu``: kernel-level functions of customized ops → GPU-level IR.

The result follows MLIR's GPU conventions: the module gets
``gpu.container_module``; one ``gpu.module @kernels`` holds a ``gpu.func``
kernel per ``kernel.customized`` op (built by ``kernel_lowering.py``); each
``func.func`` becomes a host function in destination-passing style whose
arguments are the inputs then the outputs as memrefs, which allocates the
intermediates with ``memref.alloc`` and launches the kernels in order with
``gpu.launch_func`` (grid, block and dynamic shared memory as constants). A
``kernel.reshape`` (or a contiguous ``kernel.slice``) is no kernel: its result
views its operand's buffer with ``memref.reinterpret_cast`` (``aliases.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, gpu, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    UnitAttr,
    i32,
)
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import is_trivially_dead
from xdsl.utils.exceptions import DiagnosticException

from mirage_xdsl.dialects import kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.lowering.aliases import (
    is_alias,
    offsets_of,
    output_storage,
    storage_of,
)
from mirage_xdsl.lowering.cuda_printer import strides_of
from mirage_xdsl.lowering.default_customize import customize_bare_ops
from mirage_xdsl.lowering.kernel_lowering import KernelLowering

KERNELS = "kernels"
"""Name of the ``gpu.module`` holding every kernel."""
OUTPUT_ATTR = "mirage.output"
"""Marks the host function's arguments that receive its results."""


def memref_of(ty) -> MemRefType:
    assert isinstance(ty, TensorType)
    return MemRefType(ty.element_type, ty.get_shape())


def lower_kernel(op: kernel.CustomizedOp, name: str) -> tuple[gpu.FuncOp, int]:
    """The kernel for one customized op, and its dynamic shared memory bytes."""
    arg_types = [memref_of(v.type) for v in (*op.inputs, *op.outputs)]
    fn = gpu.FuncOp(
        name,
        (arg_types, []),
        kernel=True,
        known_block_size=list(op.block_dims),
        known_grid_size=list(op.grid_dims),
    )
    shared = KernelLowering(op, fn).emit()
    return fn, shared


def lower_function(fn: func.FuncOp, kernels: Block) -> func.FuncOp:
    """The host function launching one kernel per customized op.

    A ``kernel.reshape`` launches nothing: its result is its operand's buffer
    viewed with the new shape (``memref.reinterpret_cast``), and so does a
    contiguous slice, viewed from its first element on (the cast's offset);
    a kernel whose result is returned, reshaped or not, writes the output
    buffer directly (``aliases.py``).
    """
    name = fn.sym_name.data
    body = fn.body.block
    for op in body.ops:
        if isinstance(op, t.TensorOp) and not is_alias(op):
            raise DiagnosticException(
                f"lower-to-gpu: '{op.name}' has no block-level definition; run "
                "'default-customize' first"
            )
        if isinstance(op, kernel.AllReduceOp):
            raise DiagnosticException(
                f"lower-to-gpu: '{op.name}' in @{name} sums over "
                f"{op.group_size} GPUs; a shard's program runs one stage at a "
                "time, the sums between (runtime.distributed.ShardRunner)"
            )
    storage = storage_of(fn)
    offsets = offsets_of(fn)
    outputs = output_storage(
        fn, storage, "lower-to-gpu: function ", "every output is written by a kernel"
    )
    returned = list(body.last_op.operands)  # type: ignore[union-attr]
    in_types = [memref_of(a.type) for a in body.args]
    out_types = [memref_of(v.type) for v in returned]
    host = Block(arg_types=[*in_types, *out_types])
    roots: dict[SSAValue, SSAValue] = dict(zip(body.args, host.args, strict=False))
    for root, j in outputs.items():
        roots[root] = host.args[len(in_types) + j]
    buffers: dict[SSAValue, SSAValue] = {}

    def buffer(value: SSAValue) -> SSAValue:
        """``value``'s buffer: its storage's, viewed with its own shape."""
        if value not in buffers:
            root = storage[value]
            if root not in roots:
                alloc = memref.AllocOp([], [], memref_of(root.type))
                host.add_op(alloc)
                roots[root] = alloc.memref
            base, ty = roots[root], memref_of(value.type)
            if base.type != ty or offsets[value]:
                view = memref.ReinterpretCastOp.from_dynamic(
                    base, [offsets[value]], ty.get_shape(), strides_of(ty), ty
                )
                host.add_op(view)
                base = view.result
            buffers[value] = base
        return buffers[value]

    def const(value: int, ty=None) -> SSAValue:
        op = arith.ConstantOp(IntegerAttr(value, ty or IndexType()))
        host.add_op(op)
        return op.result

    for i, op in enumerate(o for o in body.ops if isinstance(o, kernel.CustomizedOp)):
        kname = f"{name}_k{i}"
        kfn, shared = lower_kernel(op, kname)
        kernels.add_op(kfn)
        host.add_op(
            gpu.LaunchFuncOp(
                SymbolRefAttr(KERNELS, [kname]),
                [const(g) for g in op.grid_dims],
                [const(b) for b in op.block_dims],
                kernelOperands=[buffer(v) for v in (*op.inputs, *op.outputs)],
                dynamicSharedMemorySize=const(shared, i32),
            )
        )
    host.add_op(func.ReturnOp())
    attrs = [DictionaryAttr({})] * len(in_types)
    attrs += [DictionaryAttr({OUTPUT_ATTR: UnitAttr()})] * len(out_types)
    return func.FuncOp(
        name, (host.arg_types, []), Region(host), arg_attrs=ArrayAttr(attrs)
    )


EFFECT_FREE = (gpu.ThreadIdOp, gpu.BlockIdOp, arith.DivUIOp, arith.RemUIOp)
"""Side-effect free here (ids; divisors are non-zero constants), though xDSL
does not mark them so."""


def prune(module: gpu.ModuleOp) -> None:
    """Erase ops whose results are unused and that have no other effect."""
    changed = True
    while changed:
        changed = False
        for op in reversed(list(module.walk())):
            unused = op.results and all(r.first_use is None for r in op.results)
            if is_trivially_dead(op) or (unused and isinstance(op, EFFECT_FREE)):
                op.detach()
                op.erase()
                changed = True


@dataclass(frozen=True)
class LowerToGpuPass(ModulePass):
    """Lower functions of ``kernel.customized`` ops to GPU kernels and host launches.

    Each customized op becomes a ``gpu.func`` kernel in ``gpu.module @kernels``
    (scf loops, memref loads and stores, shared-memory tiles planned by
    liveness, tensor-core ``gpux.mma`` with ``ldmatrix``, ``cp.async``
    pipelining of for-loop inputs, warp-shuffle reductions); each function
    becomes a host function taking its inputs and outputs as memrefs that
    allocates intermediates and issues ``gpu.launch_func`` in order; a
    ``kernel.reshape`` becomes a ``memref.reinterpret_cast`` of its operand's
    buffer. Other bare kernel ops (a search that kept its input leaves its
    library ops) get their default kernels first (``default-customize``), as
    the Triton target's do.
    """

    name = "lower-to-gpu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        functions = [f for f in op.ops if isinstance(f, func.FuncOp)]
        if not functions:
            return
        customize_bare_ops(op, ctx)
        kernels = Block()
        for fn in functions:
            host = lower_function(fn, kernels)
            op.body.block.insert_op_before(host, fn)
            fn.detach()
            fn.erase()
        module = gpu.ModuleOp(SymbolRefAttr(KERNELS), Region(kernels))
        module.properties["sym_name"] = StringAttr(KERNELS)
        op.body.block.insert_op_before(module, op.body.block.first_op)  # type: ignore[arg-type]
        op.attributes["gpu.container_module"] = UnitAttr()
        # Index arithmetic is emitted per use; share and prune it.
        cse(module)
        prune(module)
