"""A compiled program: cubins for every kernel of a lowered program, callable on
torch CUDA tensors or numpy arrays.

Both backends produce one: the CUDA C backend from NVRTC's cubins (cached by
source and compiler version, compiled again for the device's own
architecture when it differs), the Triton backend from Triton's. The module is
loaded on the device at the first call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.lowering.program import BufferSpec, GpuProgram
from mirage_xdsl.runtime.arguments import (
    array_kind,
    check_count,
    check_numpy,
    check_torch,
    element_type,
    nbytes,
)
from mirage_xdsl.runtime.cache import CubinCache, default_cache
from mirage_xdsl.runtime.compile import compile_cuda, include_dirs, nvrtc_version
from mirage_xdsl.runtime.driver import Device, device
from mirage_xdsl.runtime.executable import LoadedProgram, validate_program


def compiler_version() -> str:
    """What the cache key must change with: NVRTC's version and its headers."""
    major, minor = nvrtc_version()
    return f"nvrtc-{major}.{minor}:{':'.join(include_dirs())}"


def target_arch(program_arch: str, device_arch: str) -> str:
    """The program's arch when it names the device's (keeps ``sm_90a``), else the device's."""
    base = program_arch.rstrip("af")
    return program_arch if base == device_arch else device_arch


class CompiledProgram:
    """A lowered program, compiled; callable on arrays once a GPU is there."""

    def __init__(
        self,
        program: GpuProgram,
        device: int | Device = 0,
        cache: CubinCache | None = None,
        cubins: Mapping[str, bytes] | None = None,
    ):
        """``cubins``: one compiled image per kernel name (the Triton backend),
        instead of compiling ``program.source`` with NVRTC."""
        validate_program(program)
        self.program = program
        self._device = device if isinstance(device, Device) else None
        self.device_ordinal = (
            device.info.ordinal if isinstance(device, Device) else device
        )
        self.cache = cache if cache is not None else default_cache()
        self.cubins = dict(cubins) if cubins is not None else None
        self.cubin = None if cubins is not None else self.cubin_for(program.arch)
        self.choices: dict[str, Any] = {}
        """Per kernel, the settings the Triton backend chose."""
        self.fallback = ""
        """Why ``backend="auto"`` fell back to CUDA C (empty when it did not)."""
        self._loaded: LoadedProgram | None = None
        self._staging: dict[str, int] = {}

    @property
    def backend(self) -> str:
        return self.program.backend

    @property
    def name(self) -> str:
        return self.program.function

    def inputs(self) -> list[BufferSpec]:
        return self.program.inputs()

    def outputs(self) -> list[BufferSpec]:
        return self.program.outputs()

    def cubin_for(self, arch: str) -> bytes:
        return self.cache.compile(
            lambda src, a, opts: compile_cuda(src, a, opts, f"{self.name}.cu"),
            compiler_version(),
            self.program.source,
            arch,
            self.program.options,
        )

    def load(self) -> LoadedProgram:
        """Load on the device (once); later calls reuse the loaded module."""
        if self._loaded is None:
            dev = self._device or device(self.device_ordinal)
            if self.cubins is not None:
                if dev.info.arch != self.program.arch:
                    raise MirageError(
                        f"error: '{self.name}' was compiled by Triton for "
                        f"{self.program.arch}; {dev.info.name} is {dev.info.arch}"
                    )
                self._loaded = LoadedProgram(self.program, self.cubins, dev)
                return self._loaded
            arch = target_arch(self.program.arch, dev.info.arch)
            cubin = self.cubin if arch == self.program.arch else self.cubin_for(arch)
            self._loaded = LoadedProgram(self.program, cubin, dev)
        return self._loaded

    @property
    def device(self) -> Device:
        return self.load().device

    def __call__(self, *args: Any, outputs: Sequence[Any] | None = None, stream=None):
        """Run on ``args``: one output is returned bare, several as a tuple."""
        result = self.run(*args, outputs=outputs, stream=stream)
        return result[0] if len(result) == 1 else tuple(result)

    def run(
        self, *args: Any, outputs: Sequence[Any] | None = None, stream=None
    ) -> list[Any]:
        """Run on ``args`` and return the outputs as a list.

        ``outputs`` may give the arrays to write (for torch: preallocated
        tensors, e.g. to capture in a CUDA graph); ``stream`` a torch stream
        or raw ``CUstream`` handle (default: torch's current stream).
        """
        check_count(args, self.inputs(), f"'{self.name}'")
        kind = array_kind(list(args) + list(outputs or []), self.name)
        if kind == "torch":
            return self._run_torch(args, outputs, stream)
        if stream is not None:
            raise MirageError("error: a stream can only be given with torch tensors")
        return self._run_numpy(args, outputs)

    def _run_torch(self, args, outputs, stream) -> list[Any]:
        import torch

        loaded = self.load()
        ordinal = self.device_ordinal
        pointers = {
            spec.name: check_torch(x, spec, "argument", i, self.name, ordinal)
            for i, (x, spec) in enumerate(zip(args, self.inputs(), strict=True))
        }
        if outputs is None:
            outputs = [
                torch.empty(
                    spec.shape,
                    dtype=element_type(spec).torch_dtype(),
                    device=f"cuda:{ordinal}",
                )
                for spec in self.outputs()
            ]
        check_count(outputs, self.outputs(), f"'{self.name}' (outputs)")
        inputs_at = set(pointers.values())
        for i, (x, spec) in enumerate(zip(outputs, self.outputs(), strict=True)):
            ptr = check_torch(x, spec, "output", i, self.name, ordinal)
            if ptr in inputs_at:
                raise MirageError(
                    f"error: output {i} ('{spec.name}') of '{self.name}' "
                    "aliases an input"
                )
            pointers[spec.name] = ptr
        if stream is None:
            stream = torch.cuda.current_stream(ordinal)
        loaded.launch(pointers, int(getattr(stream, "cuda_stream", stream)))
        return list(outputs)

    def _staging_pointers(self) -> dict[str, int]:
        """Device buffers for numpy inputs and outputs, allocated once."""
        if not self._staging:
            dev = self.load().device
            for spec in self.inputs() + self.outputs():
                self._staging[spec.name] = dev.alloc(nbytes(spec))
        return self._staging

    def _run_numpy(self, args, outputs) -> list[np.ndarray]:
        loaded = self.load()
        dev = loaded.device
        arrays = [
            check_numpy(x, spec, "argument", i, self.name)
            for i, (x, spec) in enumerate(zip(args, self.inputs(), strict=True))
        ]
        if outputs is None:
            outputs = [
                np.empty(spec.shape, element_type(spec).numpy_dtype())
                for spec in self.outputs()
            ]
        check_count(outputs, self.outputs(), f"'{self.name}' (outputs)")
        for i, (x, spec) in enumerate(zip(outputs, self.outputs(), strict=True)):
            check_numpy(x, spec, "output", i, self.name)
            if not x.flags.c_contiguous or not x.flags.writeable:
                raise MirageError(
                    f"error: output {i} ('{spec.name}') of '{self.name}' "
                    "must be a writeable C-contiguous array"
                )
        pointers = self._staging_pointers()
        for x, spec in zip(arrays, self.inputs(), strict=True):
            dev.copy_to_device(pointers[spec.name], x)
        for spec in self.outputs():
            e = element_type(spec)
            dev.fill(pointers[spec.name], nbytes(spec), e.bytes, e.nan_pattern)
        loaded.launch(pointers, 0)
        dev.synchronize(what=f"running '{self.name}'")
        for x, spec in zip(outputs, self.outputs(), strict=True):
            dev.copy_to_host(x, pointers[spec.name])
        return list(outputs)

    def synchronize(self) -> None:
        """Wait for launched work; a kernel fault is raised here by name."""
        self.load().device.synchronize(what=f"running '{self.name}'")

    def poison_intermediates(self) -> None:
        self.load().poison_intermediates()

    def close(self) -> None:
        """Free device memory and unload (the object can be loaded again)."""
        if self._loaded is not None:
            dev = self._loaded.device
            for ptr in self._staging.values():
                dev.free(ptr)
            self._staging = {}
            self._loaded.close()
            self._loaded = None

    def __enter__(self) -> CompiledProgram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
