"""Timing a program on the GPU the way users run it, for choosing between µGraphs.

A candidate is compiled with each backend (Triton autotuned, CUDA C) and
timed as ``tools/bench.py`` times: calls captured in a CUDA graph, L2 flushed
(a 256 MB write) before every call, the flushes' own time (a graph of the
flushes alone) subtracted, the median over repetitions kept. Two figures per
backend: one call per replay, and :data:`BATCH` calls per replay (launch
latency amortised, as inside a model's layer). The second decides.

:class:`GpuMeasure` is the ``measure`` the search takes: it returns seconds
per call of the faster backend and remembers, per call, what it measured.
It builds a candidate to compile quickly: its Triton kernels' short loops
unrolled in part (``lowering/triton_loops.py``) and their matmul forms moved
one way only (``program_forms.towards_dot_only``); the program built to run
has neither restriction.
Its ``prepare`` compiles the CUDA C of all the candidates at once first
(:func:`precompile`): compiled one after another, NVRTC took about a quarter
of a search's measured selection.

When the timer cannot give a figure it trusts (``timer.Unreliable``: the GPU
stayed busy with another process's work, or its figures failed the sanity
checks), the measure stops timing for the rest of that selection, warns,
and says so in ``fallback``: the search then lets the cost model choose,
and does not cache the result as a measured one. A wrong pick is never
made silently from disturbed figures.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mirage_xdsl.ir.diagnostics import first_line
from mirage_xdsl.lowering.triton_loops import rolled_loops
from mirage_xdsl.runtime.driver import GpuError
from mirage_xdsl.runtime.program_forms import towards_dot_only
from mirage_xdsl.runtime.timer import BATCH, GraphTimer, Unreliable

BACKENDS = ("triton", "cuda")


@dataclass(frozen=True)
class Timing:
    backend: str
    single_us: float
    """Median µs of one call per replay."""
    batched_us: float
    """Median µs per call with :data:`BATCH` calls per replay."""
    spread_us: tuple[float, float] | None = None
    """p10 and p90 of the batched figure's repetitions (``timer.Sample``)."""
    retried: tuple[str, ...] = ()
    """Why a figure had to be timed again (another process computing, a
    figure the checks refused) before one was accepted."""


def random_tensors(compiled, seed: int = 0) -> tuple[list[Any], list[Any]]:
    """Inputs in ±0.25 (fp16-safe for exp) and output tensors for ``compiled``."""
    import torch

    from mirage_xdsl.runtime.arguments import element_type

    gen = torch.Generator(device="cuda").manual_seed(seed)
    inputs = [
        ((torch.rand(s.shape, device="cuda", generator=gen) * 2 - 1) * 0.25).to(
            element_type(s).torch_dtype()
        )
        for s in compiled.inputs()
    ]
    outputs = [
        torch.empty(s.shape, dtype=element_type(s).torch_dtype(), device="cuda")
        for s in compiled.outputs()
    ]
    return inputs, outputs


def time_module(
    module: Any,
    backends: Sequence[str] = BACKENDS,
    timer: GraphTimer | None = None,
    lowered: Any = None,
    failures: list[str] | None = None,
) -> list[Timing]:
    """Each backend's timing of ``module``; ``lowered``: its CUDA C program
    when already lowered. A backend that cannot build or run it is left out,
    and a line on why is added to ``failures`` (when given)."""
    from mirage_xdsl.runtime.api import compile

    timer = timer or GraphTimer()
    failures = [] if failures is None else failures
    out = []
    for backend in backends:
        program = lowered if backend == "cuda" and lowered is not None else module
        try:
            compiled = compile(program, backend=backend)
        except Unreliable:  # the autotuner's timings: the GPU's, not the program's
            raise
        except Exception as e:
            # Lowering and compiling a generated µGraph can fail in any of
            # their passes, with any error: it is this program's, not the
            # search's, and the other backend may still build it.
            failures.append(_failure(f"{backend} build", e))
            continue
        try:
            inputs, outputs = random_tensors(compiled)

            def call(c=compiled, xs=inputs, ys=outputs):
                c.run(*xs, outputs=ys)

            call()  # a launch the GPU refuses (too much shared memory) fails here
            single = timer.per_call_us([call], 1)
            retried = list(getattr(timer, "retried", ()))
            batched = timer.per_call_us([call], BATCH)
            retried += getattr(timer, "retried", ())
            last = getattr(timer, "last", None)
            spread = (last.p10, last.p90) if last is not None else None
            out.append(Timing(backend, single, batched, spread, tuple(retried)))
        except GpuError as e:  # a build the GPU cannot run is no candidate
            failures.append(_failure(f"{backend} run", e))
            continue
        finally:
            compiled.close()
    return out


def _failure(what: str, error: BaseException) -> str:
    return f"{what}: {type(error).__name__}: {first_line(str(error))}"


def precompile(modules: Sequence[Any], backends: Sequence[str] = BACKENDS) -> list[Any]:
    """Compile the CUDA C of every module ahead of timing, all at once through
    NVRTC in threads (it releases the GIL), so timing each module finds its
    cubin in the cubin cache. Returns each module's lowered CUDA C program
    (``None`` where it could not be lowered, left to fail when timed), so
    timing does not lower it again.

    Triton kernels are compiled module by module, as each is tuned. In the
    one H100 run that compiled every candidate's every Triton setting ahead
    in one pool, the autotuner then chose the multiply-and-sum form for the
    plain RMSNorm + linear's matmul (77.8 µs, against 23.7 µs with ``tl.dot``
    in an earlier run); the binaries equal those compiled one by one, so the
    cause is not known, and Triton is left out here until it is."""
    if "cuda" not in backends:
        return [None] * len(modules)
    from concurrent.futures import ThreadPoolExecutor

    from mirage_xdsl.runtime.api import lower
    from mirage_xdsl.runtime.compile import nvrtc_version
    from mirage_xdsl.runtime.compiled import CompiledProgram

    # A module that fails here fails again when timed, where the reason is
    # kept (time_module's ``failures``).
    def lowered(module) -> Any:
        try:
            return lower(module)
        except Exception:
            return None

    def build(program) -> None:
        try:
            CompiledProgram(program)
        except Exception:
            pass

    programs = [lowered(m) for m in modules]
    built = [p for p in programs if p is not None]
    nvrtc_version()  # load NVRTC once, before the threads
    with ThreadPoolExecutor(max(1, min(len(built), 16))) as pool:
        list(pool.map(build, built))
    return programs


@dataclass
class GpuMeasure:
    """The search's ``measure``: seconds per call of the faster backend.

    By default it times the one backend :func:`mirage_xdsl.compile` builds a
    chosen program with (``auto``: Triton where it is installed), so the pick
    is fastest where it will run: a µGraph timed fastest in CUDA C ran several
    times slower as the Triton kernels the whole program was then compiled
    to (the 512-key decode attention on the H200)."""

    backends: tuple[str, ...] = field(default_factory=lambda: run_backends())
    last: list[Timing] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    """Why a backend could not build or run the last module timed."""
    _timer: GraphTimer | None = None
    _lowered: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    """By ``id`` of a prepared module: the module and its CUDA C program."""
    fallback: str = ""
    """Why the GPU could not be trusted during this selection (then every
    later call returns ``inf`` untimed and the search's cost model chooses);
    empty while it could."""

    @property
    def key(self) -> str:
        """What a measured choice depends on: the GPU and the compilers."""
        import torch

        try:
            import triton

            version = triton.__version__
        except ImportError:
            version = "none"
        backends = "+".join(self.backends)
        return f"gpu:{torch.cuda.get_device_name()}:triton-{version}:{backends}"

    def prepare(self, modules: Sequence[Any]) -> None:
        """Compile every module the search will time, before timing any."""
        self.fallback = ""
        programs = precompile(modules, self.backends)
        self._lowered = {id(m): (m, p) for m, p in zip(modules, programs, strict=True)}

    def __call__(self, module: Any) -> float:
        if self._timer is None:
            self._timer = GraphTimer()
        prepared, lowered = self._lowered.pop(id(module), (None, None))
        if prepared is not module:
            lowered = None
        self.failures = []
        self.last = []
        if self.fallback:
            return float("inf")
        try:
            # a candidate: its forms one way only, its loops quick to compile
            with towards_dot_only(), rolled_loops():
                self.last = time_module(
                    module, self.backends, self._timer, lowered, self.failures
                )
        except Unreliable as e:
            self.fallback = first_line(str(e))
            warnings.warn(
                f"measured selection: {self.fallback}; the cost model chooses instead",
                stacklevel=2,
            )
            return float("inf")
        if not self.last:
            return float("inf")
        return min(t.batched_us for t in self.last) * 1e-6

    def describe(self) -> dict[str, Any]:
        """What the last call measured, for the search's report (with the
        ``failures`` of the backends that could not time it, if any)."""
        failed = {"failures": list(self.failures)} if self.failures else {}
        if self.fallback:
            failed["unmeasured"] = self.fallback
        if not self.last:
            return {"backend": None, "time_us": None, **failed}
        best = min(self.last, key=lambda t: t.batched_us)
        return {
            "backend": best.backend,
            "time_us": best.batched_us,
            "single_call_us": best.single_us,
            "spread_us": best.spread_us,
            "by_backend": {t.backend: t.batched_us for t in self.last},
            **({"retried": list(best.retried)} if best.retried else {}),
            **failed,
        }


def gpu_available() -> bool:
    """A GPU that the runtime and torch can both use."""
    from mirage_xdsl.runtime.driver import gpu_unavailable_reason

    try:
        import torch
    except ImportError:
        return False
    return gpu_unavailable_reason() is None and torch.cuda.is_available()


def run_backends() -> tuple[str, ...]:
    """The backend a chosen program runs with: ``compile``'s ``auto``."""
    from mirage_xdsl.runtime.api import resolve_backend

    return (resolve_backend("auto"),)
