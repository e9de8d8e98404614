"""``mirage_xdsl.compile(module)``: a µGraph program as a callable on the GPU.

::

    compiled = mirage_xdsl.compile(module)   # lower to CUDA C, NVRTC to cubin
    out = compiled(Q, K, V)                   # torch tensors in, torch tensors out

Compilation to a cubin happens at once and needs no GPU, so a program that does
not compile fails here, on any machine. The module is loaded on the device at
the first call, compiled again for the device's own architecture if it differs
from the program's. torch tensors are used in place and the kernels run on
PyTorch's current stream, asynchronously like any torch op (so they can be
captured in a CUDA graph); numpy arrays are copied in, run synchronously and
copied out.
"""

from __future__ import annotations

from typing import Any

from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.lowering.program import GpuProgram
from mirage_xdsl.runtime.cache import CubinCache
from mirage_xdsl.runtime.compiled import CompiledProgram
from mirage_xdsl.runtime.driver import Device, open_for_lowering


def lower(module: Any, function: str | None = None) -> GpuProgram:
    """The CUDA program for a function of ``module`` (the code generator's entry)."""
    try:
        from mirage_xdsl.lowering.cuda import generate_program
    except ImportError as e:
        if e.name not in ("mirage_xdsl.lowering.cuda",):
            raise
        raise MirageError(
            "error: CUDA code generation (mirage_xdsl.lowering.cuda) is not "
            "available in this installation"
        ) from None
    return generate_program(module, function)


BACKENDS = ("auto", "triton", "cuda")


def triton_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("triton") is not None


def resolve_backend(backend: str) -> str:
    """``auto`` is Triton where it is installed, else CUDA C."""
    if backend not in BACKENDS:
        raise MirageError(
            f"error: unknown backend '{backend}' (expected one of {list(BACKENDS)})"
        )
    if backend == "auto":
        return "triton" if triton_installed() else "cuda"
    return backend


def compile(
    program: Any,
    function: str | None = None,
    *,
    backend: str = "auto",
    device: int | Device = 0,
    cache: CubinCache | None = None,
    tune: bool | None = None,
) -> CompiledProgram:
    """Lower ``program`` (a module of µGraphs, or a :class:`GpuProgram`) and compile it.

    ``backend``: ``triton`` (Triton kernels, autotuned when a GPU is visible
    unless ``tune=False``), ``cuda`` (CUDA C through NVRTC), or ``auto``
    (Triton where it is installed, and CUDA C for a program Triton cannot
    build; ``compiled.fallback`` says why). A :class:`GpuProgram` is CUDA C
    already.
    """
    if isinstance(program, GpuProgram):
        return CompiledProgram(program, device=device, cache=cache)
    fallback = ""
    if resolve_backend(backend) == "triton":
        from mirage_xdsl.runtime.triton_backend import compile_triton

        try:
            return compile_triton(program, function, device=device, tune=tune)
        except MirageError as e:
            if backend != "auto":
                raise
            # auto: a program Triton cannot build (a tile over the shared
            # memory a block has, say) still runs, as CUDA C
            fallback = str(e).removeprefix("error: ")
    open_for_lowering(device)  # the default lowering plans for this GPU
    compiled = CompiledProgram(lower(program, function), device=device, cache=cache)
    compiled.fallback = fallback
    return compiled
