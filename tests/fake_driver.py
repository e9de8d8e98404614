"""A stand-in for cuda-python's driver module, for tests without a GPU.

It follows cuda-python's calling convention (every call returns a tuple whose
first element is a ``CUresult``), keeps "device memory" in host memory, checks
that loaded images are ELF cubins, and runs kernels as numpy functions
registered by name. Kernel parameters are read back from the ``void*[]`` the
runtime passes, so argument packing is tested for real.
"""

from __future__ import annotations

import ctypes
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_INVALID_IMAGE = 200
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_ILLEGAL_ADDRESS = 700


DESCRIPTIONS = {
    CUresult.CUDA_ERROR_INVALID_VALUE: "invalid argument",
    CUresult.CUDA_ERROR_OUT_OF_MEMORY: "out of memory",
    CUresult.CUDA_ERROR_NO_DEVICE: "no CUDA-capable device is detected",
    CUresult.CUDA_ERROR_INVALID_IMAGE: "device kernel image is invalid",
    CUresult.CUDA_ERROR_NOT_FOUND: "named symbol not found",
    CUresult.CUDA_ERROR_ILLEGAL_ADDRESS: "an illegal memory access was encountered",
}

OK = (CUresult.CUDA_SUCCESS,)


class _Handle:
    def __init__(self, value: int = 0):
        self.value = int(value)

    def __int__(self) -> int:
        return self.value


class CUdeviceptr(_Handle):
    pass


class CUstream(_Handle):
    pass


CUdevice_attribute = SimpleNamespace(
    **{
        f"CU_DEVICE_ATTRIBUTE_{n}": n
        for n in (
            "COMPUTE_CAPABILITY_MAJOR",
            "COMPUTE_CAPABILITY_MINOR",
            "MULTIPROCESSOR_COUNT",
            "L2_CACHE_SIZE",
            "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
        )
    }
)
CUfunction_attribute = SimpleNamespace(
    **{
        f"CU_FUNC_ATTRIBUTE_{n}": n
        for n in (
            "MAX_THREADS_PER_BLOCK",
            "SHARED_SIZE_BYTES",
            "NUM_REGS",
            "MAX_DYNAMIC_SHARED_SIZE_BYTES",
        )
    }
)


def view(ptr: int, dtype, count: int) -> np.ndarray:
    """A numpy view of fake device memory."""
    dtype = np.dtype(dtype)
    buf = (ctypes.c_uint8 * (count * dtype.itemsize)).from_address(int(ptr))
    return np.frombuffer(buf, dtype=dtype, count=count)


CUlaunchAttributeID = SimpleNamespace(
    CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION=6
)


class CUlaunchAttribute:
    def __init__(self):
        self.id = 0
        self.value = SimpleNamespace(programmaticStreamSerializationAllowed=0)


class CUlaunchConfig:
    def __init__(self):
        self.gridDimX = self.gridDimY = self.gridDimZ = 1
        self.blockDimX = self.blockDimY = self.blockDimZ = 1
        self.sharedMemBytes = 0
        self.hStream = CUstream(0)
        self.attrs: list[CUlaunchAttribute] = []
        self.numAttrs = 0


Kernel = Callable[[tuple, tuple, list[int]], None]
"""``kernel(grid, block, pointers)``: runs on fake device memory."""


@dataclass
class Launch:
    name: str
    grid: tuple
    block: tuple
    shared: int
    stream: int
    pointers: list[int]
    programmatic: bool = False


@dataclass
class FakeDriver:
    kernels: dict[str, tuple[int, Kernel]] = field(default_factory=dict)
    """name -> (number of pointer parameters, implementation)."""
    devices: int = 1
    init_result: CUresult = CUresult.CUDA_SUCCESS
    max_threads: int = 1024
    static_shared: int = 0
    pending_error: CUresult = CUresult.CUDA_SUCCESS
    launches: list[Launch] = field(default_factory=list)
    func_attributes: dict = field(default_factory=dict)
    allocations: dict[int, np.ndarray] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    CUresult = CUresult
    CUdeviceptr = CUdeviceptr
    CUstream = CUstream
    CUdevice_attribute = CUdevice_attribute
    CUfunction_attribute = CUfunction_attribute
    CUlaunchAttributeID = CUlaunchAttributeID
    CUlaunchAttribute = CUlaunchAttribute
    CUlaunchConfig = CUlaunchConfig

    def __getattribute__(self, name: str):
        if name.startswith("cu") and not name.startswith("cu_"):
            object.__getattribute__(self, "calls").append(name)
        return object.__getattribute__(self, name)

    # errors
    def cuGetErrorName(self, code):
        return OK + (CUresult(int(code)).name.encode(),)

    def cuGetErrorString(self, code):
        return OK + (DESCRIPTIONS.get(CUresult(int(code)), "").encode(),)

    # device and context
    def cuInit(self, flags):
        return (self.init_result,)

    def cuDeviceGetCount(self):
        return OK + (self.devices,)

    def cuDeviceGet(self, ordinal):
        return OK + (ordinal,)

    def cuDevicePrimaryCtxRetain(self, dev):
        return OK + (f"ctx{dev}",)

    def cuCtxSetCurrent(self, ctx):
        return OK

    def cuCtxSynchronize(self):
        err, self.pending_error = self.pending_error, CUresult.CUDA_SUCCESS
        return (err,)

    def cuDeviceGetName(self, length, dev):
        return OK + (b"Fake H100\0\0\0",)

    def cuDeviceGetAttribute(self, attr, dev):
        values = {
            "COMPUTE_CAPABILITY_MAJOR": 9,
            "COMPUTE_CAPABILITY_MINOR": 0,
            "MULTIPROCESSOR_COUNT": 132,
            "L2_CACHE_SIZE": 50 << 20,
            "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 227 * 1024,
        }
        return OK + (values[attr],)

    # memory
    def cuMemAlloc(self, nbytes):
        buf = np.zeros(nbytes + 16, dtype=np.uint8)
        ptr = (buf.ctypes.data + 15) // 16 * 16
        self.allocations[ptr] = buf
        return OK + (CUdeviceptr(ptr),)

    def cuMemFree(self, ptr):
        if self.allocations.pop(int(ptr), None) is None:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        return OK

    def cuMemcpyHtoD(self, dst, src, nbytes):
        ctypes.memmove(int(dst), int(src), nbytes)
        return OK

    def cuMemcpyDtoH(self, dst, src, nbytes):
        ctypes.memmove(int(dst), int(src), nbytes)
        return OK

    def cuMemsetD16(self, ptr, value, count):
        view(ptr, np.uint16, count)[:] = value
        return OK

    def cuMemsetD32(self, ptr, value, count):
        view(ptr, np.uint32, count)[:] = value
        return OK

    # modules and launches
    def cuModuleLoadData(self, image):
        if ctypes.string_at(int(image), 4) != b"\x7fELF":
            return (CUresult.CUDA_ERROR_INVALID_IMAGE,)
        return OK + ("module",)

    def cuModuleUnload(self, module):
        return OK

    def cuModuleGetFunction(self, module, name):
        if name.decode() not in self.kernels:
            return (CUresult.CUDA_ERROR_NOT_FOUND,)
        return OK + (name.decode(),)

    def cuFuncGetAttribute(self, attr, f):
        values = {
            "MAX_THREADS_PER_BLOCK": self.max_threads,
            "SHARED_SIZE_BYTES": self.static_shared,
            "NUM_REGS": 255,
        }
        return OK + (values[attr],)

    def cuFuncSetAttribute(self, f, attr, value):
        self.func_attributes[(f, attr)] = value
        return OK

    def cuLaunchKernelEx(self, config, f, params, extra):
        programmatic = any(
            a.id
            == CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            and a.value.programmaticStreamSerializationAllowed
            for a in config.attrs[: config.numAttrs]
        )
        return self._launch(
            f,
            (config.gridDimX, config.gridDimY, config.gridDimZ),
            (config.blockDimX, config.blockDimY, config.blockDimZ),
            config.sharedMemBytes,
            config.hStream,
            params,
            programmatic,
        )

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        return self._launch(
            f, (gx, gy, gz), (bx, by, bz), shared, stream, params, False
        )

    def _launch(self, f, grid, block, shared, stream, params, programmatic):
        (gx, gy, gz), (bx, by, bz) = grid, block
        arity, kernel = self.kernels[f]
        slots = view(params, np.uint64, arity)
        pointers = [int(view(int(s), np.uint64, 1)[0]) for s in slots]
        if (
            shared > 48 * 1024
            and self.func_attributes.get((f, "MAX_DYNAMIC_SHARED_SIZE_BYTES"), 0)
            < shared
        ):
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        self.launches.append(
            Launch(
                f,
                (gx, gy, gz),
                (bx, by, bz),
                shared,
                int(stream),
                pointers,
                programmatic,
            )
        )
        kernel((gx, gy, gz), (bx, by, bz), pointers)
        return OK
