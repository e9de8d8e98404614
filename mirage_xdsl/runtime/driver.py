"""A thin layer over cuda-python's driver API: errors by name, one device.

cuda-python returns ``(CUresult, *values)`` from every call; :meth:`Driver.call`
turns a failure into a one-line :class:`CudaError` naming the call and the
error (``cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE (device kernel image
is invalid)``). The driver module is a parameter, so tests substitute a fake
one and check error reporting on machines without a GPU.

The runtime works in the device's primary context, the one PyTorch uses, so
pointers from ``tensor.data_ptr()`` are valid in it and launches can go on
PyTorch's streams (and into its CUDA graphs).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from mirage_xdsl import gpu_target
from mirage_xdsl.ir.diagnostics import MirageError


class GpuError(MirageError):
    """A CUDA driver call failed."""


class GpuUnavailable(GpuError):
    """No GPU, no driver or no cuda-python: nothing can run on a device."""


def import_driver() -> ModuleType:
    """cuda-python's driver module: ``cuda.bindings.driver`` (12.6+), else ``cuda.cuda``."""
    try:
        from cuda.bindings import driver  # type: ignore[import-not-found]

        return driver
    except ImportError:
        pass
    try:
        from cuda import cuda  # type: ignore[import-not-found]

        return cuda
    except ImportError:
        raise GpuUnavailable(
            "error: cuda-python is not installed (pip install 'mirage-xdsl[gpu]')"
        ) from None


class Driver:
    """Checked calls into a cuda-python driver module."""

    def __init__(self, module: ModuleType):
        self.cu = module

    def error_name(self, code: Any) -> str:
        """``CUDA_ERROR_...`` for a result code, with the driver's description."""
        try:
            status, name = self.cu.cuGetErrorName(code)
            if int(status) != 0:
                raise ValueError
            text = name.decode() if isinstance(name, bytes) else str(name)
        except Exception:
            return f"CUDA error {int(code)}"
        try:
            status, desc = self.cu.cuGetErrorString(code)
            if int(status) == 0 and desc:
                desc = desc.decode() if isinstance(desc, bytes) else str(desc)
                return f"{text} ({desc})"
        except Exception:
            pass
        return text

    def call(self, fn: str, *args: Any, what: str = "") -> Any:
        """Call ``cu.<fn>(*args)``; return its value(s), raise :class:`GpuError`."""
        try:
            result = getattr(self.cu, fn)(*args)
        except RuntimeError as e:  # cuda-python could not load libcuda
            raise GpuUnavailable(f"error: no CUDA driver: {e}") from None
        status, *values = result if isinstance(result, tuple) else (result,)
        if int(status) != 0:
            context = f" ({what})" if what else ""
            raise GpuError(
                f"error: {fn} failed{context}: {self.error_name(status)}"
            ) from None
        if not values:
            return None
        return values[0] if len(values) == 1 else tuple(values)

    def attribute(self, name: str) -> Any:
        return getattr(self.cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")

    def func_attribute(self, name: str) -> Any:
        return getattr(self.cu.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")

    def can_launch_programmatically(self) -> bool:
        """Whether this driver module has ``cuLaunchKernelEx`` and the
        programmatic-stream-serialization launch attribute."""
        ids = getattr(self.cu, "CUlaunchAttributeID", None)
        return hasattr(self.cu, "cuLaunchKernelEx") and hasattr(
            ids, "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION"
        )

    def programmatic_config(
        self, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int
    ) -> Any:
        """A ``CUlaunchConfig`` that lets the kernel start before the previous
        one in its stream has finished (the kernel must wait for it itself);
        its ``hStream`` is set per launch."""
        cu = self.cu
        attr = cu.CUlaunchAttribute()
        attr.id = (
            cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        )
        attr.value.programmaticStreamSerializationAllowed = 1
        config = cu.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = grid
        config.blockDimX, config.blockDimY, config.blockDimZ = block
        config.sharedMemBytes = shared
        config.attrs = [attr]
        config.numAttrs = 1
        return config


@dataclass(frozen=True)
class DeviceInfo:
    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    l2_bytes: int
    max_shared_per_block_optin: int

    @property
    def arch(self) -> str:
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"


class Device:
    """One GPU, through its primary context."""

    def __init__(self, ordinal: int = 0, driver: Driver | None = None):
        self.driver = driver or Driver(import_driver())
        d = self.driver
        try:
            d.call("cuInit", 0)
        except GpuError as e:
            if isinstance(e, GpuUnavailable):
                raise
            raise GpuUnavailable(f"error: no usable CUDA GPU: {e}") from None
        count = d.call("cuDeviceGetCount")
        if count == 0:
            raise GpuUnavailable("error: no CUDA GPU found")
        if not 0 <= ordinal < count:
            raise GpuError(f"error: no CUDA device {ordinal} (found {count})")
        self.handle = d.call("cuDeviceGet", ordinal)
        self.context = d.call("cuDevicePrimaryCtxRetain", self.handle)
        self.make_current()
        self.info = self._read_info(ordinal)
        # the lowering plans for this GPU from now on (gpu_target.current)
        gpu_target.use(gpu_target.for_device(self.info.name))

    def make_current(self) -> None:
        self.driver.call("cuCtxSetCurrent", self.context)

    def _read_info(self, ordinal: int) -> DeviceInfo:
        d = self.driver

        def attr(name: str) -> int:
            return int(d.call("cuDeviceGetAttribute", d.attribute(name), self.handle))

        raw = d.call("cuDeviceGetName", 256, self.handle)
        name = raw.split(b"\0", 1)[0].decode() if isinstance(raw, bytes) else str(raw)
        return DeviceInfo(
            ordinal=ordinal,
            name=name,
            compute_capability=(
                attr("COMPUTE_CAPABILITY_MAJOR"),
                attr("COMPUTE_CAPABILITY_MINOR"),
            ),
            multiprocessors=attr("MULTIPROCESSOR_COUNT"),
            l2_bytes=attr("L2_CACHE_SIZE"),
            max_shared_per_block_optin=attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        )

    # --- memory --------------------------------------------------------------

    def alloc(self, nbytes: int) -> int:
        return int(self.driver.call("cuMemAlloc", max(nbytes, 1), what=f"{nbytes} B"))

    def free(self, ptr: int) -> None:
        self.driver.call("cuMemFree", self.driver.cu.CUdeviceptr(ptr))

    def copy_to_device(self, ptr: int, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        self.driver.call(
            "cuMemcpyHtoD",
            self.driver.cu.CUdeviceptr(ptr),
            array.ctypes.data,
            array.nbytes,
        )

    def copy_to_host(self, array: np.ndarray, ptr: int) -> None:
        assert array.flags.c_contiguous
        self.driver.call(
            "cuMemcpyDtoH",
            array.ctypes.data,
            self.driver.cu.CUdeviceptr(ptr),
            array.nbytes,
        )

    def fill(self, ptr: int, nbytes: int, element_bytes: int, pattern: int) -> None:
        """Fill ``nbytes`` with a repeated 2- or 4-byte pattern (e.g. NaN)."""
        fn = {2: "cuMemsetD16", 4: "cuMemsetD32"}[element_bytes]
        self.driver.call(
            fn, self.driver.cu.CUdeviceptr(ptr), pattern, nbytes // element_bytes
        )

    def synchronize(self, what: str = "") -> None:
        """Wait for the device; asynchronous kernel faults surface here."""
        self.make_current()
        self.driver.call("cuCtxSynchronize", what=what)

    def stream(self, handle: int) -> Any:
        return self.driver.cu.CUstream(handle)


_devices: dict[int, Device] = {}


def gpu_unavailable_reason() -> str | None:
    """Why no program can run here (``None`` when a GPU is usable)."""
    try:
        device(0)
    except GpuError as e:
        return str(e).removeprefix("error: ")
    return None


def open_for_lowering(which: int | Device = 0) -> None:
    """Open GPU ``which`` where one is usable, so the lowering that follows
    plans for it (``gpu_target.current``); nothing where none is."""
    if isinstance(which, Device):
        gpu_target.use(gpu_target.for_device(which.info.name))
        return
    try:
        device(which)
    except GpuError:
        pass


def device(ordinal: int = 0) -> Device:
    """The process-wide :class:`Device` for ``ordinal`` (opened on first use)."""
    if ordinal not in _devices:
        _devices[ordinal] = Device(ordinal)
    return _devices[ordinal]
