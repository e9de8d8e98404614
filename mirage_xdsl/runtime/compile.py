"""CUDA C to cubin through NVRTC, loaded with ctypes.

NVRTC comes from the ``nvidia-cuda-nvrtc`` wheel (or a CUDA toolkit), not from
cuda-python, so machines without a GPU or cuda-python still compile every
generated kernel. The half-precision headers (``cuda_fp16.h``, ``cuda_bf16.h``)
are not built into NVRTC; they come from the ``nvidia-cuda-runtime`` wheel or
the toolkit, whichever is found first (see :func:`include_dirs`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from mirage_xdsl.gpu_target import H100
from mirage_xdsl.ir.diagnostics import MirageError, first_line


class CompileError(MirageError):
    """NVRTC rejected a source; ``log`` holds the whole compiler log."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class NvrtcUnavailable(MirageError):
    """No NVRTC library could be loaded."""


def _nvidia_roots() -> list[Path]:
    """Folders of the ``nvidia`` namespace package (pip's CUDA wheels)."""
    try:
        import nvidia  # type: ignore[import-not-found]
    except ImportError:
        return []
    return [Path(p) for p in getattr(nvidia, "__path__", [])]


def _toolkit_roots() -> list[Path]:
    roots = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")]
    return [Path(r) for r in roots if r] + [Path("/usr/local/cuda")]


def _library_candidates() -> Iterator[str]:
    """Where NVRTC may be, most specific first."""
    if env := os.environ.get("MIRAGE_NVRTC"):
        yield env
    for root in _nvidia_roots():
        for sub, name in (("cu13/lib", "libnvrtc.so.13"), ("cuda_nvrtc/lib", "")):
            folder = root / sub
            if name:
                yield str(folder / name)
            elif folder.is_dir():
                yield from sorted(str(p) for p in folder.glob("libnvrtc.so*"))
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib  # type: ignore

        yield load_nvidia_dynamic_lib("nvrtc").abs_path
    except Exception:
        pass
    for root in _toolkit_roots():
        for sub in ("lib64", "lib"):
            folder = root / sub
            if folder.is_dir():
                yield from sorted(str(p) for p in folder.glob("libnvrtc.so*"))
    if found := ctypes.util.find_library("nvrtc"):
        yield found
    yield from ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")


def _preload_builtins(folder: Path | None) -> None:
    """Load ``libnvrtc-builtins`` from NVRTC's own folder first.

    NVRTC opens it by bare name at compile time, which fails when NVRTC itself
    was found by path outside the loader's search list (as in pip's wheels).
    """
    if folder is None:
        return
    for lib in sorted(folder.glob("libnvrtc-builtins.so*")):
        if ".alt." not in lib.name:
            ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
            return


@functools.cache
def nvrtc() -> ctypes.CDLL:
    """The NVRTC library, loaded once."""
    tried = []
    for path in _library_candidates():
        if os.sep in path and not os.path.exists(path):
            continue
        try:
            _preload_builtins(Path(path).parent if os.sep in path else None)
            lib = ctypes.CDLL(path)
        except OSError:
            tried.append(path)
            continue
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        return lib
    raise NvrtcUnavailable(
        "error: NVRTC not found (pip install 'nvidia-cuda-nvrtc==13.0.*', "
        "or set MIRAGE_NVRTC to libnvrtc.so)"
    )


def nvrtc_version() -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(nvrtc().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "version")
    return major.value, minor.value


def _has_fp16_header(folder: Path) -> bool:
    return (folder / "cuda_fp16.h").is_file()


@functools.cache
def include_dirs() -> tuple[str, ...]:
    """One folder holding ``cuda_fp16.h``, preferring NVRTC's own CUDA version.

    One folder only: headers of two CUDA versions must not mix.
    """
    if env := os.environ.get("MIRAGE_CUDA_INCLUDE"):
        return (env,)
    major = nvrtc_version()[0]
    candidates = [root / f"cu{major}" / "include" for root in _nvidia_roots()]
    candidates += [root / "cuda_runtime" / "include" for root in _nvidia_roots()]
    candidates += [root / "include" for root in _toolkit_roots()]
    for folder in candidates:
        if _has_fp16_header(folder):
            return (str(folder),)
    return ()


def _check(status: int, what: str) -> None:
    if status != 0:
        name = nvrtc().nvrtcGetErrorString(status).decode()
        raise CompileError(f"error: NVRTC {what} failed: {name}")


def _read(prog: ctypes.c_void_p, size_fn: str, get_fn: str) -> bytes:
    lib = nvrtc()
    size = ctypes.c_size_t()
    if getattr(lib, size_fn)(prog, ctypes.byref(size)) != 0 or size.value == 0:
        return b""
    buf = ctypes.create_string_buffer(size.value)
    _check(getattr(lib, get_fn)(prog, buf), get_fn)
    return buf.raw


def _text(raw: bytes) -> str:
    return raw.rstrip(b"\0").decode(errors="replace")


def nvrtc_options(arch: str, options: Sequence[str]) -> list[str]:
    """The full NVRTC command line for a real architecture such as ``sm_90``."""
    flags = [f"--gpu-architecture={arch}", "--std=c++17"]
    flags += [f"-I{d}" for d in include_dirs()]
    return flags + list(options)


def compile_cuda(
    source: str,
    arch: str = H100.arch,
    options: Sequence[str] = (),
    name: str = "program.cu",
) -> tuple[bytes, str, str]:
    """Compile CUDA C for ``arch``; return ``(cubin, ptx, log)``.

    Raises :class:`CompileError` with the first error line of the log; the
    whole log is on the exception.
    """
    lib = nvrtc()
    prog = ctypes.c_void_p()
    _check(
        lib.nvrtcCreateProgram(
            ctypes.byref(prog), source.encode(), name.encode(), 0, None, None
        ),
        "program creation",
    )
    try:
        flags = [f.encode() for f in nvrtc_options(arch, options)]
        argv = (ctypes.c_char_p * len(flags))(*flags)
        status = lib.nvrtcCompileProgram(prog, len(flags), argv)
        log = _text(_read(prog, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog"))
        if status != 0:
            errors = [line for line in log.splitlines() if "error" in line]
            detail = first_line(errors[0] if errors else log) or "no log"
            raise CompileError(f"error: CUDA compilation failed: {detail}", log)
        cubin = _read(prog, "nvrtcGetCUBINSize", "nvrtcGetCUBIN")
        ptx = _text(_read(prog, "nvrtcGetPTXSize", "nvrtcGetPTX"))
        if not cubin:
            raise CompileError(f"error: NVRTC produced no cubin for '{arch}'", log)
        return cubin, ptx, log
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
