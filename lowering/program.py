"""What the CUDA code generator hands to the runtime: a lowered program.

A ``GpuProgram`` is the whole ``func.func`` after lowering: one CUDA C source
holding every kernel, the device buffers the function needs (its inputs, its
outputs and the intermediates between kernels) and the launches in order. The
runtime compiles ``source`` once (NVRTC, ``sm_90``), allocates the
intermediates, and replays ``launches`` with buffer pointers as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mirage_xdsl.gpu_target import H100

BufferKind = Literal["input", "output", "intermediate"]


@dataclass(frozen=True)
class BufferSpec:
    """A device tensor of the function: row-major, contiguous."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    """Element type as in MLIR: "f16", "bf16" or "f32"."""
    kind: BufferKind
    index: int
    """Position among the function's inputs or outputs (-1 for intermediates)."""


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel launch: ``name<<<grid, block, shared_bytes>>>(*args)``.

    ``args`` name buffers; each kernel parameter is a pointer to that buffer's
    first element, in this order, or ``offsets`` elements past it (a
    contiguous slice reads its operand's buffer in place: ``aliases.py``).
    """

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: tuple[str, ...]
    scratch: tuple[int, ...] = ()
    """Trailing scratch parameters (Triton's global and profile scratch): the
    bytes each needs per block; the runtime allocates them, or passes NULL for 0."""
    offsets: tuple[int, ...] = ()
    """Elements from each buffer's first element to the one its parameter
    points at, per argument (none: all 0)."""
    waits: bool = False
    """The kernel executes ``griddepcontrol.wait`` before it reads anything
    another kernel wrote or stores anything (before it, it may read only the
    program's inputs), so the runtime may launch it programmatically: its
    blocks start while the previous kernel's last blocks still run, and the
    launch latency between the two is hidden. A kernel without the wait is
    always launched plainly."""


@dataclass(frozen=True)
class GpuProgram:
    """CUDA C source plus the buffers and launches that run one function."""

    function: str
    source: str
    buffers: tuple[BufferSpec, ...]
    launches: tuple[KernelLaunch, ...]
    arch: str = H100.arch
    options: tuple[str, ...] = field(default=())
    """Extra NVRTC options the source needs."""
    backend: str = "cuda"
    """``cuda``: ``source`` is CUDA C for NVRTC; ``triton``: a Python module of
    Triton kernels, compiled kernel by kernel (the cubins travel beside it)."""

    def inputs(self) -> list[BufferSpec]:
        return of_kind(self.buffers, "input")

    def outputs(self) -> list[BufferSpec]:
        return of_kind(self.buffers, "output")


def of_kind(buffers: tuple[BufferSpec, ...], kind: BufferKind) -> list[BufferSpec]:
    """The function's inputs or outputs, in argument order."""
    return sorted((b for b in buffers if b.kind == kind), key=lambda b: b.index)
