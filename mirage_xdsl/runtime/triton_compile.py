"""Triton kernels to cubin, ahead of time and without a GPU.

The generated module is executed from memory (its source registered with
``linecache``, so ``@triton.jit`` can read it back) and each kernel is compiled
with ``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))``:
Triton's own lowering (ttir → ttgir → llir → ptx → cubin) runs on the CPU.
Every pointer is declared 16-byte aligned (``tt.divisibility``), which lets
Triton vectorise loads; the runtime allocates every buffer at 256 bytes.

A compiled kernel takes, after its own pointers, the scratch pointers recent
Triton versions add (global and profile scratch). :class:`TritonBinary`
records how many there are and what each needs per block, read off the
kernel's metadata and checked against the PTX entry's parameter count.
"""

from __future__ import annotations

import functools
import hashlib
import linecache
import os
import re
from dataclasses import dataclass
from typing import Any

from mirage_xdsl.gpu_target import H100
from mirage_xdsl.ir.diagnostics import MirageError

TARGET_ARCH = H100.capability
"""90, sm_90 (H100): Triton compiles it as sm_90a, with wgmma."""
GRID_DEPENDENCY_ARCH = 90
"""Grid dependency control (``griddepcontrol``) needs sm_90."""


class TritonUnavailable(MirageError):
    """triton is not installed."""


@dataclass(frozen=True)
class KernelConfig:
    """What the autotuner chooses per kernel."""

    variant: str
    num_warps: int = 4
    num_stages: int = 3

    def key(self) -> str:
        return f"{self.variant}:w{self.num_warps}:s{self.num_stages}"


@dataclass(frozen=True)
class TritonBinary:
    """A compiled kernel and what launching it takes."""

    name: str
    cubin: bytes
    num_warps: int
    shared_bytes: int
    scratch: tuple[int, ...]
    """Bytes per block of each trailing scratch parameter (0: pass NULL)."""
    ptx: str = ""


def triton_module() -> Any:
    try:
        os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
        import triton
    except ImportError:
        raise TritonUnavailable(
            "error: the Triton backend needs triton (pip install triton, or the "
            "'gpu' extra); use backend='cuda' without it"
        ) from None
    return triton


def triton_version() -> str:
    return triton_module().__version__


@functools.cache
def load_source(source: str, grid_dependency: bool = False) -> dict[str, Any]:
    """Execute a generated module from memory; its globals by name.

    ``grid_dependency`` turns the module's ``GRID_DEPENDENCY`` on before
    anything is compiled, as the runtime does: it compiles the kernels for
    sm_90 and launches each programmatically after the one before, so each
    must wait for its predecessor (:func:`waits` reads that off the binary).
    As printed, the module leaves it off, for Triton's own launcher and its
    interpreter."""
    triton = triton_module()
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    filename = f"<mirage-triton-{digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"__name__": f"mirage_triton_{digest}"}
    exec(compile(source, filename, "exec"), namespace)
    if grid_dependency and "GRID_DEPENDENCY" in namespace:
        namespace["GRID_DEPENDENCY"] = triton.language.constexpr(True)
    return namespace


def waits(binary: TritonBinary) -> bool:
    """Whether the compiled kernel waits for the kernel before it (and may so
    be launched programmatically)."""
    return "griddepcontrol.wait" in binary.ptx


def _param_count(ptx: str, name: str) -> int:
    match = re.search(rf"\.entry\s+{re.escape(name)}\s*\((.*?)\)", ptx, re.S)
    if match is None:
        raise MirageError(f"error: Triton produced no entry '{name}' in its PTX")
    return match.group(1).count(".param")


def compile_kernel(
    source: str, signature: tuple[str, ...], config: KernelConfig
) -> TritonBinary:
    """Compile one kernel of a generated module to an sm_90 cubin."""
    triton = triton_module()
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = load_source(source, TARGET_ARCH >= GRID_DEPENDENCY_ARCH)[config.variant]
    names = fn.arg_names
    sig = dict(zip(names, signature, strict=True))
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(names))}
    try:
        compiled = triton.compile(
            ASTSource(fn, sig, None, attrs),
            target=GPUTarget("cuda", TARGET_ARCH, H100.warp_size),
            options={"num_warps": config.num_warps, "num_stages": config.num_stages},
        )
    except Exception as e:  # Triton raises its own CompilationError and others
        detail = str(e).strip().splitlines()
        raise MirageError(
            f"error: Triton could not compile '{config.variant}' ({config.key()}): "
            + (detail[-1] if detail else type(e).__name__)
        ) from e
    meta = compiled.metadata
    scratch = tuple(
        int(getattr(meta, f"{kind}_scratch_size"))
        for kind in ("global", "profile")
        if hasattr(meta, f"{kind}_scratch_size")
    )
    ptx = compiled.asm["ptx"]
    name = compiled.name
    params = _param_count(ptx, name)
    if params != len(names) + len(scratch):
        raise MirageError(
            f"error: '{name}' takes {params} parameters, but Triton "
            f"{triton.__version__}'s metadata accounts for {len(names)} pointers "
            f"and {len(scratch)} scratch buffers"
        )
    return TritonBinary(
        name=name,
        cubin=compiled.asm["cubin"],
        num_warps=int(meta.num_warps),
        shared_bytes=int(meta.shared),
        scratch=scratch,
        ptx=ptx,
    )
