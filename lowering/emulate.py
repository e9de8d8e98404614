"""A SIMT emulator of the GPU-level IR in numpy: evidence without a GPU.

Every thread of every block of a launch is one *lane*; each SSA value is a
numpy array over all lanes (``(lanes,)`` for scalars, ``(lanes, n)`` for
fragments), and ops execute in lockstep under an activity mask, as a GPU
would run a convergent warp. Loops with per-lane bounds (block-stride loops)
run until no lane is active. The warp-level ops are emulated with their PTX
ISA semantics (``ldmatrix`` row addresses and fragment layouts,
``mma.m16n8k16`` register layouts, butterfly shuffles), so a wrong index in
the generated code shows up as a wrong number.

Three classes of bugs that lockstep execution would otherwise hide are
reported as :class:`EmulationError`:

- *races*: shared memory is tracked per 2-byte unit with the last writer and
  reader and the barrier epoch; a read of a value another thread wrote, or a
  write over a value another thread read, in the same epoch (no
  ``__syncthreads`` in between) is a race;
- *early reads of async copies*: ``cp.async`` data lands in shared memory only
  when a ``cp.async.wait_group`` retires its group;
- *unwritten memory*: shared memory and outputs start as NaN.

The emulator is in four modules: this one runs host functions and launches
and dispatches each op to its rule; ``emulate_state.py`` holds a launch's
state and the memory model that reports races; ``emulate_ops.py`` has the
rules of the ordinary ops, ``emulate_warp.py`` those of the warp-collective
ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import numpy as np
from xdsl.dialects import arith, func, gpu, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from mirage_xdsl.lowering.cuda_printer import strides_of
from mirage_xdsl.lowering.emulate_ops import HANDLERS
from mirage_xdsl.lowering.emulate_state import (
    UNIT,
    GlobalRef,
    Launch,
    loaded,
    np_dtype,
    stored,
    unwritten,
)
from mirage_xdsl.lowering.lower_to_gpu import OUTPUT_ATTR


class Emulator:
    """Runs a GPU-level module's host functions, every GPU thread a numpy lane."""

    def __init__(self, module: ModuleOp):
        self.kernels = {
            k.sym_name.data: k
            for m in module.ops
            if isinstance(m, gpu.ModuleOp)
            for k in m.body.block.ops
            if isinstance(k, gpu.FuncOp)
        }
        self.module = module

    # --- host side -------------------------------------------------------

    def run(
        self, inputs: Sequence[np.ndarray], function: str | None = None
    ) -> list[np.ndarray]:
        hosts = [f for f in self.module.ops if isinstance(f, func.FuncOp)]
        host = next(h for h in hosts if function is None or h.sym_name.data == function)
        env: dict[SSAValue, np.ndarray] = {}
        attrs = host.arg_attrs.data if host.arg_attrs else [None] * len(host.args)
        outputs = []
        inputs = list(inputs)
        for arg, attr in zip(host.args, attrs, strict=True):
            ty = arg.type
            assert isinstance(ty, MemRefType)
            if attr is not None and OUTPUT_ATTR in attr.data:
                env[arg] = unwritten(ty.get_shape(), ty.element_type)
                outputs.append(env[arg])
            else:
                env[arg] = np.ascontiguousarray(
                    stored(inputs.pop(0), np_dtype(ty.element_type))
                )
        consts: dict[SSAValue, int] = {}
        for op in host.body.block.ops:
            if isinstance(op, arith.ConstantOp):
                consts[op.result] = op.value.value.data  # type: ignore[union-attr]
            elif isinstance(op, memref.AllocOp):
                ty = op.memref.type
                env[op.memref] = unwritten(ty.get_shape(), ty.element_type)
            elif isinstance(op, memref.ReinterpretCastOp):
                # a reshape or a contiguous slice: a view of the same array
                shape = op.result.type.get_shape()
                start = op.static_offsets.get_values()[0]
                flat = env[op.source].reshape(-1)[start : start + prod(shape)]
                env[op.result] = flat.reshape(shape)
            elif isinstance(op, gpu.LaunchFuncOp):
                kernel = self.kernels[op.kernel.nested_references.data[-1].data]
                grid = [consts[v] for v in (op.gridSizeX, op.gridSizeY, op.gridSizeZ)]
                blk = [consts[v] for v in (op.blockSizeX, op.blockSizeY, op.blockSizeZ)]
                shared = (
                    consts[op.dynamicSharedMemorySize]
                    if op.dynamicSharedMemorySize
                    else 0
                )
                self.launch(
                    kernel, grid, blk, shared, [env[v] for v in op.kernelOperands]
                )
        return [loaded(o) for o in outputs]

    # --- one launch ------------------------------------------------------

    def launch(self, kernel: gpu.FuncOp, grid, blk, shared_bytes: int, args) -> None:
        threads = blk[0] * blk[1] * blk[2]
        blocks = grid[0] * grid[1] * grid[2]
        lanes = blocks * threads
        lane = np.arange(lanes)
        block_of = lane // threads
        tid = lane % threads
        units = max(1, -(-shared_bytes // UNIT))
        self.state = Launch(
            lanes=lanes,
            threads=threads,
            block_of=block_of,
            tid=tid,
            block_ids={
                "x": block_of % grid[0],
                "y": (block_of // grid[0]) % grid[1],
                "z": block_of // (grid[0] * grid[1]),
            },
            shared=np.full((blocks, units * UNIT), 0xFF, np.uint8),
            writer=np.full((blocks, units), -1, np.int64),
            reader=np.full((blocks, units), -1, np.int64),
            write_epoch=np.full((blocks, units), -1, np.int64),
            read_epoch=np.full((blocks, units), -1, np.int64),
        )
        self.thread_xyz = {
            "x": tid % blk[0],
            "y": (tid // blk[0]) % blk[1],
            "z": tid // (blk[0] * blk[1]),
        }
        self.values: dict[SSAValue, object] = {}
        for arg, array in zip(kernel.body.block.args, args, strict=True):
            ty = arg.type
            assert isinstance(ty, MemRefType)
            self.values[arg] = GlobalRef(array.reshape(-1), strides_of(ty))
        self.block(kernel.body.block, np.ones(lanes, bool))

    def block(self, block: Block, mask: np.ndarray) -> None:
        for op in block.ops:
            self.op(op, mask)

    def __getitem__(self, v: SSAValue):
        return self.values[v]

    def set(self, op: Operation, value) -> None:
        self.values[op.results[0]] = value

    def op(self, op: Operation, mask: np.ndarray) -> None:
        handler = HANDLERS.get(type(op))
        if handler is None:
            raise NotImplementedError(f"the emulator has no rule for '{op.name}'")
        handler(self, op, mask)

    # --- memory ------------------------------------------------------------

    def linear(self, ref, indices) -> np.ndarray:
        total = np.zeros(self.state.lanes, np.int64)
        for i, s in zip(indices, ref.strides, strict=True):
            total = total + np.asarray(self[i], np.int64) * s
        return total


def emulate(
    module: ModuleOp, inputs: Sequence[np.ndarray], function: str | None = None
) -> list[np.ndarray]:
    """Run a GPU-level module's host function on ``inputs`` (numpy arrays)."""
    from mirage_xdsl.lowering.cuda import lowered

    # Inactive lanes compute on placeholder values; their results are dropped.
    with np.errstate(all="ignore"):
        return Emulator(lowered(module)).run(inputs, function)
