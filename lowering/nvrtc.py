"""NVRTC, the CUDA runtime compiler, through ctypes: CUDA C → PTX and cubin.

The library comes from the pip package ``nvidia-cuda-nvrtc`` (pinned to 13.0
to match the GPU machine's driver), so compiling needs no CUDA toolkit and no
GPU: CI compiles every generated kernel here. :func:`compile_cuda` returns the
PTX, the cubin for ``sm_90`` and the compiler log; ptxas's resource report
(registers, shared memory, spills) is in the log when ``verbose`` is set.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
from dataclasses import dataclass
from functools import cache

from mirage_xdsl.gpu_target import H100
from mirage_xdsl.ir.diagnostics import MirageError

DEFAULT_ARCH = H100.arch


class NvrtcError(MirageError):
    """NVRTC is missing or rejected the source."""


@dataclass(frozen=True)
class Compiled:
    ptx: str
    cubin: bytes
    log: str


@dataclass(frozen=True)
class Resources:
    """ptxas's report for one kernel."""

    kernel: str
    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int


def _candidates() -> list[str]:
    paths = []
    try:
        import nvidia  # type: ignore[import-not-found]

        for root in nvidia.__path__:
            paths += sorted(glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so*")))
    except ImportError:
        pass
    paths += sorted(glob.glob("/usr/local/cuda*/lib64/libnvrtc.so*"))
    return [p for p in paths if "builtins" not in p and ".alt." not in p] + [
        "libnvrtc.so"
    ]


@cache
def library() -> ctypes.CDLL:
    """The NVRTC shared library, or a one-line error saying how to get it."""
    for path in _candidates():
        try:
            # NVRTC dlopens its builtins by name: load them from beside it first.
            for builtins in glob.glob(
                os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.*")
            ):
                if ".alt." not in builtins:
                    ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
            return ctypes.CDLL(path)
        except OSError:
            continue
    raise NvrtcError(
        "error: NVRTC not found; install it with "
        "pip install 'nvidia-cuda-nvrtc==13.0.*'"
    )


def available() -> bool:
    try:
        library()
    except NvrtcError:
        return False
    return True


def _check(lib: ctypes.CDLL, status: int, what: str) -> None:
    if status:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise NvrtcError(
            f"error: NVRTC {what} failed: {lib.nvrtcGetErrorString(status).decode()}"
        )


def _read(lib: ctypes.CDLL, prog: ctypes.c_void_p, name: str) -> bytes:
    size = ctypes.c_size_t()
    _check(lib, getattr(lib, f"nvrtcGet{name}Size")(prog, ctypes.byref(size)), name)
    buf = ctypes.create_string_buffer(size.value)
    _check(lib, getattr(lib, f"nvrtcGet{name}")(prog, buf), name)
    return buf.raw[: size.value]


def compile_cuda(
    source: str,
    name: str = "kernels.cu",
    arch: str = DEFAULT_ARCH,
    options: tuple[str, ...] = (),
    verbose: bool = False,
) -> Compiled:
    """Compile CUDA C for ``arch``; raises :class:`NvrtcError` with the log on failure."""
    lib = library()
    prog = ctypes.c_void_p()
    _check(
        lib,
        lib.nvrtcCreateProgram(
            ctypes.byref(prog), source.encode(), name.encode(), 0, None, None
        ),
        "create",
    )
    try:
        opts = [f"--gpu-architecture={arch}", "--std=c++17", *options]
        if verbose:
            opts.append("--ptxas-options=-v")
        argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        status = lib.nvrtcCompileProgram(prog, len(opts), argv)
        log = _read(lib, prog, "ProgramLog").rstrip(b"\0").decode(errors="replace")
        if status:
            first = next((ln for ln in log.splitlines() if "error" in ln), log.strip())
            raise NvrtcError(f"{name}: error: NVRTC compilation failed: {first}\n{log}")
        ptx = _read(lib, prog, "PTX").rstrip(b"\0").decode()
        cubin = _read(lib, prog, "CUBIN")
        return Compiled(ptx, cubin, log)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


_FUNCTION = re.compile(r"Compiling entry function '(\w+)'")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_STACK = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)


def resources(log: str) -> list[Resources]:
    """Per-kernel resource usage from a ``verbose`` compile log."""
    out: list[Resources] = []
    current: dict[str, int | str] = {}
    for line in log.splitlines():
        if m := _FUNCTION.search(line):
            if current:
                out.append(_resources(current))
            current = {"kernel": m.group(1)}
        elif m := _STACK.search(line):
            current.update(
                stack=int(m.group(1)), st=int(m.group(2)), ld=int(m.group(3))
            )
        elif m := _USED.search(line):
            current["registers"] = int(m.group(1))
            if s := _SMEM.search(line):
                current["smem"] = int(s.group(1))
    if current:
        out.append(_resources(current))
    return out


def _resources(d: dict[str, int | str]) -> Resources:
    return Resources(
        kernel=str(d["kernel"]),
        registers=int(d.get("registers", 0)),
        shared_bytes=int(d.get("smem", 0)),
        stack_bytes=int(d.get("stack", 0)),
        spill_stores=int(d.get("st", 0)),
        spill_loads=int(d.get("ld", 0)),
    )
