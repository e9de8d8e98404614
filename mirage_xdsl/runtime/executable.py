"""A :class:`GpuProgram` loaded on a device: functions, intermediates, launches.

Loading checks each launch against what the compiled kernel allows (threads
per block, static plus dynamic shared memory) and raises the dynamic
shared-memory limit of kernels that need more than the default 48 KB, so a bad
configuration fails with a sentence instead of ``CUDA_ERROR_INVALID_VALUE`` at
launch. Intermediates are allocated once and reused by every call.

On Hopper, every kernel after the first whose code waits for its predecessor
(``KernelLaunch.waits``: the Triton backend's kernels) is launched with
programmatic stream serialization, so its launch overlaps the tail of the
kernel before it instead of following its completion.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from mirage_xdsl.gpu_target import H100
from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.lowering.program import GpuProgram, KernelLaunch
from mirage_xdsl.runtime.arguments import element_type, nbytes
from mirage_xdsl.runtime.driver import Device, GpuError

DEFAULT_SHARED_LIMIT = 48 * 1024
"""Dynamic shared memory a kernel may use without raising its limit."""

MAX_THREADS = H100.max_threads_per_block

PROGRAMMATIC_ARCH = (9, 0)
"""Programmatic dependent launch needs Hopper or later."""


def programmatic_launch_enabled() -> bool:
    """Programmatic dependent launch is on unless ``MIRAGE_PROGRAMMATIC_LAUNCH=0``
    (every kernel then waits for the one before it to finish, as plain
    launches do; the switch is for comparing the two and for debugging)."""
    return os.environ.get("MIRAGE_PROGRAMMATIC_LAUNCH", "1").lower() not in (
        "0",
        "off",
        "no",
        "false",
    )


def validate_program(program: GpuProgram) -> None:
    """Static checks of a program's buffers and launches (no GPU needed)."""
    where = f"program '{program.function}'"
    names = Counter(b.name for b in program.buffers)
    if dup := [n for n, c in names.items() if c > 1]:
        raise MirageError(f"error: {where}: buffer '{dup[0]}' is declared twice")
    for b in program.buffers:
        element_type(b)
        if any(s <= 0 for s in b.shape):
            raise MirageError(f"error: {where}: buffer '{b.name}' has shape {b.shape}")
    for kind, specs in (("input", program.inputs()), ("output", program.outputs())):
        if [b.index for b in specs] != list(range(len(specs))):
            raise MirageError(
                f"error: {where}: {kind} indices are {[b.index for b in specs]}, "
                f"expected 0..{len(specs) - 1}"
            )
    if not program.outputs():
        raise MirageError(f"error: {where}: no output buffers")
    for launch in program.launches:
        _validate_launch(program, launch, where)


def _validate_launch(program: GpuProgram, launch: KernelLaunch, where: str) -> None:
    what = f"error: {where}: launch of '{launch.name}'"
    if not re.search(rf"\b{re.escape(launch.name)}\s*\(", program.source):
        raise MirageError(f"{what}: no such kernel in the source")
    buffers = {b.name: b for b in program.buffers}
    if missing := [a for a in launch.args if a not in buffers]:
        raise MirageError(f"{what}: argument '{missing[0]}' names no buffer")
    if launch.offsets and len(launch.offsets) != len(launch.args):
        raise MirageError(
            f"{what}: {len(launch.offsets)} offsets for {len(launch.args)} arguments"
        )
    for a, at in zip(launch.args, launch.offsets, strict=False):
        if not 0 <= at < int(np.prod(buffers[a].shape)):
            raise MirageError(f"{what}: offset {at} lies outside buffer '{a}'")
    if len(launch.grid) != 3 or len(launch.block) != 3:
        raise MirageError(f"{what}: grid and block must have three dims")
    if min(launch.grid) < 1 or min(launch.block) < 1:
        raise MirageError(f"{what}: grid {launch.grid} / block {launch.block}")
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    if threads > MAX_THREADS:
        raise MirageError(f"{what}: {threads} threads per block (max {MAX_THREADS})")
    if launch.shared_bytes < 0:
        raise MirageError(f"{what}: negative shared memory")


class LoadedProgram:
    """The program's module, functions and intermediates on one device."""

    def __init__(
        self, program: GpuProgram, cubin: bytes | Mapping[str, bytes], device: Device
    ):
        """``cubin``: one image holding every kernel (CUDA C), or one per kernel
        name (Triton compiles kernel by kernel)."""
        validate_program(program)
        self.program = program
        self.device = device
        device.make_current()
        images = cubin if isinstance(cubin, Mapping) else None
        self.modules: list[Any] = []
        self._images: list[np.ndarray] = []
        shared = None if images is not None else self._load(cubin)  # type: ignore[arg-type]
        self.functions = {}
        for name in {x.name for x in program.launches}:
            if images is not None:
                if name not in images:
                    raise MirageError(f"error: no cubin for kernel '{name}'")
                module = self._load(images[name])
            else:
                module = shared
            self.functions[name] = self._function(module, name)
        for name, f in self.functions.items():
            self._configure(name, f)
        self.intermediates: dict[str, int] = {}
        for b in program.buffers:
            if b.kind == "intermediate":
                self.intermediates[b.name] = device.alloc(nbytes(b))
        self.scratch: list[list[int]] = [
            [
                device.alloc(size * x.grid[0] * x.grid[1] * x.grid[2]) if size else 0
                for size in x.scratch
            ]
            for x in program.launches
        ]
        self._params = [self._param_block(x) for x in program.launches]
        self._offsets = [self._byte_offsets(x) for x in program.launches]
        self._configs = self._launch_configs()

    @property
    def module(self) -> Any:
        return self.modules[0] if self.modules else None

    def _load(self, cubin: bytes) -> Any:
        image = np.frombuffer(cubin, dtype=np.uint8).copy()
        self._images.append(image)
        module = self.device.driver.call(
            "cuModuleLoadData", image.ctypes.data, what=self.program.function
        )
        self.modules.append(module)
        return module

    def _function(self, module: Any, name: str) -> Any:
        try:
            return self.device.driver.call(
                "cuModuleGetFunction", module, name.encode(), what=name
            )
        except GpuError as e:
            raise GpuError(f'{e} (is the kernel declared extern "C"?)') from None

    def _configure(self, name: str, f: Any) -> None:
        d = self.device.driver
        launches = [x for x in self.program.launches if x.name == name]

        def attr(a: str) -> int:
            return int(d.call("cuFuncGetAttribute", d.func_attribute(a), f, what=name))

        max_threads = attr("MAX_THREADS_PER_BLOCK")
        static = attr("SHARED_SIZE_BYTES")
        dynamic = max(x.shared_bytes for x in launches)
        limit = self.device.info.max_shared_per_block_optin
        for x in launches:
            threads = x.block[0] * x.block[1] * x.block[2]
            if threads > max_threads:
                raise GpuError(
                    f"error: kernel '{name}' is launched with {threads} threads per "
                    f"block, but its compiled code allows at most {max_threads} "
                    f"({attr('NUM_REGS')} registers per thread)"
                )
        if static + dynamic > limit:
            raise GpuError(
                f"error: kernel '{name}' needs {static} B static + {dynamic} B "
                f"dynamic shared memory; {self.device.info.name} allows {limit} B"
            )
        if dynamic > DEFAULT_SHARED_LIMIT:
            d.call(
                "cuFuncSetAttribute",
                f,
                d.func_attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES"),
                dynamic,
                what=name,
            )

    def _launch_configs(self) -> list[Any]:
        """Per launch, the ``CUlaunchConfig`` of a programmatic launch, or
        ``None`` for a plain one. The first kernel is always launched plainly
        (it must see everything queued before the call, and the previous
        call's last kernel must be done with the intermediates); a later one
        programmatically when it waits for its predecessor itself (its
        ``waits``), the GPU is Hopper or later and the driver has the call."""
        d = self.device.driver
        able = (
            programmatic_launch_enabled()
            and tuple(self.device.info.compute_capability) >= PROGRAMMATIC_ARCH
            and d.can_launch_programmatically()
        )
        return [
            d.programmatic_config(x.grid, x.block, x.shared_bytes)
            if able and i > 0 and x.waits
            else None
            for i, x in enumerate(self.program.launches)
        ]

    @staticmethod
    def _param_block(launch: KernelLaunch) -> tuple[np.ndarray, np.ndarray]:
        """Argument values and the ``void*[]`` pointing at them, reused per call."""
        count = len(launch.args) + len(launch.scratch)
        values = np.zeros(count, dtype=np.uint64)
        base = values.ctypes.data
        params = np.array([base + 8 * i for i in range(count)], dtype=np.uint64)
        return values, params

    def _byte_offsets(self, launch: KernelLaunch) -> list[int]:
        """Bytes from each argument's buffer start to where its parameter points."""
        specs = {b.name: b for b in self.program.buffers}
        offsets = launch.offsets or (0,) * len(launch.args)
        return [
            at * element_type(specs[a]).bytes
            for a, at in zip(launch.args, offsets, strict=True)
        ]

    def launch(self, pointers: dict[str, int], stream: int = 0) -> None:
        """Launch every kernel in order on ``stream`` (programmatically where
        :meth:`_launch_configs` allows).

        ``pointers`` gives the device address of every input and output;
        intermediates are the program's own.
        """
        d = self.device.driver
        handle = self.device.stream(stream)
        self.device.make_current()
        for launch, (values, params), offsets, scratch, config in zip(
            self.program.launches,
            self._params,
            self._offsets,
            self.scratch,
            self._configs,
            strict=True,
        ):
            for i, arg in enumerate(launch.args):
                base = pointers[arg] if arg in pointers else self.intermediates[arg]
                values[i] = base + offsets[i]
            for i, ptr in enumerate(scratch):
                values[len(launch.args) + i] = ptr
            if config is not None:
                config.hStream = handle
                d.call(
                    "cuLaunchKernelEx",
                    config,
                    self.functions[launch.name],
                    params.ctypes.data,
                    0,
                    what=launch.name,
                )
                continue
            d.call(
                "cuLaunchKernel",
                self.functions[launch.name],
                *launch.grid,
                *launch.block,
                launch.shared_bytes,
                handle,
                params.ctypes.data,
                0,
                what=launch.name,
            )

    def poison_intermediates(self) -> None:
        """Fill intermediates with NaN, so reads of unwritten data show."""
        for b in self.program.buffers:
            if b.kind == "intermediate":
                e = element_type(b)
                self.device.fill(
                    self.intermediates[b.name], nbytes(b), e.bytes, e.nan_pattern
                )

    def close(self) -> None:
        """Free intermediates and unload the module (idempotent)."""
        try:
            self.device.make_current()
            for ptr in self.intermediates.values():
                self.device.free(ptr)
            self.intermediates = {}
            for ptr in [p for ps in self.scratch for p in ps if p]:
                self.device.free(ptr)
            self.scratch = [[] for _ in self.program.launches]
            for module in self.modules:
                self.device.driver.call("cuModuleUnload", module)
            self.modules = []
        except GpuError:
            pass
