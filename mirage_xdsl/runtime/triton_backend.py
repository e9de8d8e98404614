"""The Triton backend: a µGraph module to a :class:`CompiledProgram` of Triton cubins.

``lowering/triton.py`` prints the kernels; this module picks each kernel's
settings (measured on a GPU, see ``autotune``), compiles them to sm_90 cubins
and describes the launches in the same :class:`GpuProgram` contract the CUDA C
backend uses, so one runtime loads and launches both, CUDA-graph capture
included. A Triton kernel runs with ``32 · num_warps`` threads, the shared
memory its metadata names, and its scratch parameters after the buffers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.lowering.program import BufferSpec, GpuProgram, KernelLaunch
from mirage_xdsl.lowering.triton import TritonKernel, TritonProgram, generate_triton
from mirage_xdsl.runtime import autotune
from mirage_xdsl.runtime.program_forms import Chosen, pick_forms
from mirage_xdsl.runtime.triton_compile import KernelConfig, TritonBinary, waits


def launch_of(kernel: TritonKernel, binary: TritonBinary) -> KernelLaunch:
    return KernelLaunch(
        name=binary.name,
        grid=kernel.grid,
        block=(32 * binary.num_warps, 1, 1),
        shared_bytes=binary.shared_bytes,
        args=kernel.args,
        offsets=kernel.offsets,
        scratch=binary.scratch,
        waits=waits(binary),
    )


def assemble(
    program: TritonProgram, chosen: Chosen
) -> tuple[GpuProgram, dict[str, bytes]]:
    """The launch plan with the chosen binaries, and their cubins by kernel name."""
    launches = tuple(launch_of(k, chosen[k.name][1]) for k in program.kernels)
    cubins = {b.name: b.cubin for _, b in chosen.values()}
    gpu = GpuProgram(
        program.function, program.source, program.buffers, launches, backend="triton"
    )
    return gpu, cubins


def untuned(program: TritonProgram, form: int | None = None) -> Chosen:
    """Every kernel compiled with the heuristic's settings; ``form`` forces
    each kernel's matmul form (0: ``tl.dot``, 1: multiply-and-sum, where the
    kernel has it)."""
    configs = []
    for k in program.kernels:
        config = autotune.heuristic(k)
        if form is not None:
            variant = k.variants[min(form, len(k.variants) - 1)]
            config = KernelConfig(variant, config.num_warps, config.num_stages)
        configs.append(config)
    binaries = autotune.compile_all(
        program.source,
        [(k.signature, c) for k, c in zip(program.kernels, configs, strict=True)],
    )
    chosen: Chosen = {}
    for k, c, b in zip(program.kernels, configs, binaries, strict=True):
        for smaller in autotune.fallbacks(c):
            if (
                not isinstance(b, TritonBinary)
                or b.shared_bytes <= autotune.SHARED_LIMIT
            ):
                break
            c, b = (
                smaller,
                autotune.compile_all(program.source, [(k.signature, smaller)])[0],
            )
        if not isinstance(b, TritonBinary):
            raise MirageError(f"error: Triton could not compile '{c.variant}': {b}")
        if b.shared_bytes > autotune.SHARED_LIMIT:
            raise MirageError(
                f"error: kernel '{b.name}' needs {b.shared_bytes} B of shared memory "
                f"under Triton, over the {autotune.SHARED_LIMIT} B an H100 block has"
            )
        chosen[k.name] = (c, b)
    return chosen


def graph_timer(device: Any, reps: int = 20) -> Any:
    """The ``GraphTimer`` tuning times with on ``device``: a CUDA graph, L2
    flushed before each launch and the flush's time subtracted, median of
    ``reps``."""
    from mirage_xdsl.runtime.timer import GraphTimer

    return GraphTimer(reps=reps, warmup=3, device=f"cuda:{device.info.ordinal}")


def random_buffer(spec: BufferSpec, timer: Any) -> Any:
    """A torch tensor of ``spec``'s shape and type on the timer's device,
    uniform in [-0.5, 0.5): what tuning times kernels and programs on."""
    import torch

    from mirage_xdsl.runtime.arguments import element_type

    return torch.empty(
        spec.shape,
        dtype=element_type(spec).torch_dtype(),
        device=timer.flush_buffer.device,
    ).uniform_(-0.5, 0.5)


def kernel_timer(program: TritonProgram, device: Any, timer: Any) -> autotune.Timer:
    """Times one kernel alone on random inputs with ``timer``
    (:func:`graph_timer`), as the benchmark times a program, in microseconds."""
    import torch

    from mirage_xdsl.runtime.executable import LoadedProgram

    specs = {b.name: b for b in program.buffers}

    def time(kernel: TritonKernel, binary: TritonBinary) -> float:
        buffers = []
        for i, name in enumerate(kernel.args):
            last = i == len(kernel.args) - 1
            spec = specs[name]
            buffers.append(
                BufferSpec(
                    f"a{i}",
                    spec.shape,
                    spec.dtype,
                    "output" if last else "input",
                    0 if last else i,
                )
            )
        tensors = {b.name: random_buffer(b, timer) for b in buffers}
        launch = replace(launch_of(kernel, binary), args=tuple(b.name for b in buffers))
        one = GpuProgram(
            binary.name, program.source, tuple(buffers), (launch,), backend="triton"
        )
        loaded = LoadedProgram(one, {binary.name: binary.cubin}, device)
        pointers = {n: t.data_ptr() for n, t in tensors.items()}

        def call() -> None:
            loaded.launch(pointers, torch.cuda.current_stream().cuda_stream)

        try:
            return timer.per_call_us([call], 1)
        finally:
            loaded.close()

    return time


def program_timer(
    program: TritonProgram, device: Any, timer: Any
) -> Callable[[Chosen], float]:
    """Times the whole program built from a choice of settings on random
    inputs with ``timer``, as measured selection times a program (``BATCH``
    calls per graph), in microseconds per call. The inputs are made on the
    first call (most builds time nothing)."""

    @functools.cache
    def inputs() -> list[Any]:
        specs = sorted(
            (b for b in program.buffers if b.kind == "input"), key=lambda b: b.index
        )
        return [random_buffer(b, timer) for b in specs]

    def time(chosen: Chosen) -> float:
        from mirage_xdsl.runtime.compiled import CompiledProgram
        from mirage_xdsl.runtime.timer import BATCH

        gpu, cubins = assemble(program, chosen)
        compiled = CompiledProgram(gpu, device=device, cubins=cubins)
        xs = inputs()
        outs = compiled.run(*xs)
        return timer.per_call_us([lambda: compiled.run(*xs, outputs=outs)], BATCH)

    return time


def lower_triton(module: Any, function: str | None = None) -> TritonProgram:
    return generate_triton(module, function)


def compile_triton(
    module: Any,
    function: str | None = None,
    *,
    device: int | Any = 0,
    tune: bool | None = None,
    form: int | None = None,
    log: Callable[[str], None] | None = None,
):
    """Lower ``module`` to Triton, pick settings (autotuned when a GPU is
    visible and ``tune`` is not False), compile, and return the program.
    ``form`` (untuned only) forces the matmul form of every kernel."""
    from mirage_xdsl.runtime.compiled import CompiledProgram
    from mirage_xdsl.runtime.driver import (
        Device,
        gpu_unavailable_reason,
        open_for_lowering,
    )
    from mirage_xdsl.runtime.driver import device as open_device

    open_for_lowering(device)  # the default lowering plans for this GPU
    program = (
        module if isinstance(module, TritonProgram) else lower_triton(module, function)
    )
    if tune is None:
        tune = gpu_unavailable_reason() is None
    if tune and form is None:
        dev = device if isinstance(device, Device) else open_device(device)
        timer = graph_timer(dev)
        per_kernel = kernel_timer(program, dev, timer)

        def tune_kernels(kernels: list[TritonKernel]) -> Chosen:
            return autotune.tune(
                program.source, kernels, dev.info.name, per_kernel, log
            )

        chosen = pick_forms(
            program,
            tune_kernels(list(program.kernels)),
            dev.info.name,
            tune_kernels,
            program_timer(program, dev, timer),
            log,
        )
    else:
        chosen = untuned(program, form)
    gpu, cubins = assemble(program, chosen)
    compiled = CompiledProgram(gpu, device=device, cubins=cubins)
    compiled.choices = {k: c for k, (c, _) in chosen.items()}
    return compiled
