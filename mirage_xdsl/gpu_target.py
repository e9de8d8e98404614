"""The GPU the project generates code for: its limits, architecture and speeds.

One :class:`Target` describes a GPU; every layer reads its numbers from one
instead of writing them down again: the dialect verifiers (shared memory and
threads per block), the default customization (how many blocks fill the
GPU), the shared-memory plan and the autotuner (shared memory per block), the
compilers (the ``sm_XY`` architecture for NVRTC, the capability for Triton)
and the search's cost model (bandwidths, FLOP rates, latencies).

:data:`H100` (SXM, sm_90) is the default everywhere. :data:`H200` is the
same chip with faster memory; the default lowering plans its skinny matmuls
for the GPU :func:`current` names (the one the runtime opened, or
``MIRAGE_GPU``), because how many bytes a one-row block must read to be
worth its launch, and how many blocks keep the memory busy, depend on the
memory's speed (``lowering/split_k.py``). The limits
are the CUDA occupancy figures for compute capability 9.0; the speeds are
the datasheet numbers the cost model ranks with (they need only be right in
proportion, see ``search/cost_model.py`` and ``search/calibration.py``,
which fits the float ones to measured times).

This module is the package's lowest layer: it imports nothing of the project.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace


@dataclass(frozen=True, kw_only=True)
class Target:
    """One GPU, as the verifiers, the lowering, the compilers and the cost
    model see it."""

    name: str
    arch: str
    """The real architecture NVRTC compiles for, such as ``sm_90``."""
    compute_capability: tuple[int, int]
    """``(major, minor)``; ``arch`` is ``sm_<major><minor>``."""
    sms: int
    """Streaming multiprocessors."""
    shared_memory_per_block: int
    """Bytes of shared memory one block may use (the opt-in maximum)."""
    max_threads_per_block: int
    registers_per_thread: int
    """Most 32-bit registers one thread may use."""
    registers_per_sm: int
    warp_size: int
    dram_bandwidth: float
    """Bytes per second between device memory and the GPU."""
    l2_bandwidth: float
    l2_bytes: int
    sm_dram_bandwidth: float
    """What one SM can pull from memory on its own."""
    block_bandwidth: float
    """What one block streams on its own: the tiles its warps load, change
    layout and compute on per second (far below an SM's share of the memory
    when it is the SM's only block)."""
    smem_bandwidth_per_sm: float
    tensor_flops: float
    cuda_flops: float
    launch_seconds: float
    load_latency_seconds: float
    """Round trip of a block's first tile load, before any compute can start."""
    iteration_seconds: float
    """Synchronisation per for-loop iteration (pipelined loads hide the rest)."""
    rescale_seconds: float
    """What each iteration of a for-loop that rescales its running sums
    (an online softmax: a row maximum, then the sums shifted by it) adds:
    the maximum's reduction across the block, the exponentials and the
    rescale wait on one another, every iteration, and loads do not hide
    them."""

    def __post_init__(self) -> None:
        major, minor = self.compute_capability
        if self.arch != f"sm_{major}{minor}":
            raise ValueError(
                f"target {self.name}: arch {self.arch} is not compute capability "
                f"{major}.{minor}"
            )

    @property
    def capability(self) -> int:
        """The compute capability as one number (``90``), as Triton's
        ``GPUTarget`` takes it."""
        major, minor = self.compute_capability
        return 10 * major + minor


H100 = Target(
    name="H100",
    arch="sm_90",
    compute_capability=(9, 0),
    sms=132,
    shared_memory_per_block=227 * 1024,
    max_threads_per_block=1024,
    registers_per_thread=255,
    registers_per_sm=64 * 1024,
    warp_size=32,
    dram_bandwidth=3.0e12,
    l2_bandwidth=7.0e12,
    l2_bytes=50 * 2**20,
    sm_dram_bandwidth=70e9,
    block_bandwidth=40e9,
    smem_bandwidth_per_sm=128 * 1.755e9,
    tensor_flops=750e12,
    cuda_flops=60e12,
    launch_seconds=2e-6,
    load_latency_seconds=0.7e-6,
    iteration_seconds=0.02e-6,
    rescale_seconds=0.7e-6,
)
"""The NVIDIA H100 SXM: what the generated kernels are compiled, verified and
costed for."""

H200 = replace(H100, name="H200", dram_bandwidth=4.3e12)
"""The NVIDIA H200: the H100's chip (the same SMs, limits and caches) with
HBM3e, whose copy kernel measured 4.28 TB/s where the H100's measured
3.02."""

TARGETS = {t.name: t for t in (H100, H200)}
"""Every target by name."""

ENV = "MIRAGE_GPU"
"""The environment variable naming the target (``H100``, ``H200``) that
:func:`current` returns whatever GPU is open."""

_opened: Target | None = None


class UnknownTarget(ValueError):
    """``MIRAGE_GPU`` names no target."""


def for_device(name: str) -> Target:
    """The target of a CUDA device called ``name`` (``NVIDIA H200``): the
    one whose name the device's contains, :data:`H100` otherwise."""
    return next((t for t in TARGETS.values() if t.name in name.upper()), H100)


def use(target: Target) -> None:
    """Make ``target`` this process's: the runtime calls it when it opens a
    GPU, before any search forks its workers, so they plan for it too."""
    global _opened
    _opened = target


def current() -> Target:
    """The target the lowering plans for: the one ``MIRAGE_GPU`` names, else
    the GPU this process opened (:func:`use`), else :data:`H100`."""
    named = os.environ.get(ENV)
    if named:
        try:
            return TARGETS[named.strip().upper()]
        except KeyError:
            raise UnknownTarget(
                f"{ENV}={named} names no GPU target (known: {', '.join(TARGETS)})"
            ) from None
    return _opened or H100


__all__ = [
    "ENV",
    "H100",
    "H200",
    "TARGETS",
    "Target",
    "UnknownTarget",
    "current",
    "for_device",
    "use",
]
