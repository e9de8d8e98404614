"""Choosing each Triton kernel's settings: measured on a GPU, a heuristic without.

The µGraph fixes a kernel's tiles, grid and for-loop; what it leaves free is
the matmul form (tensor-core ``tl.dot`` on rows padded to 16, or
multiply-and-sum for few rows), the number of warps and the software
pipeline's stages. On a GPU each form with each warp count is compiled (in
parallel processes) and timed alone on random inputs, with the L2 cache
flushed before every launch and the median kept; then the fastest's other
stage counts, where its form pipelines a ``tl.dot`` (:func:`first_round`,
:func:`second_round`, of :func:`space`); the fastest wins. The choice
is cached on disk under ``$MIRAGE_CACHE_DIR/triton-tune``, keyed by the
kernel's printed source with its name left out (:func:`tune_key`), its
grid, the GPU's name and the triton version.
Compiled kernels are also kept in memory (the most recent
:data:`REMEMBERED`), so a module compiled again in the same process (the
search's pick, compiled by its caller after the search tuned it) forks no
compiler processes.

Tuning keeps to the deadline of the search timing the kernels
(``search.budget.timing_until``): past it only the heuristic's setting is
compiled, and compilers still at work when it comes are stopped
(:func:`compile_all`), each kernel's heuristic setting having been compiled
first. A kernel with nothing compiled then gets :data:`LATE_COMPILE_SECONDS`
more; one with nothing compiled by then too fails the candidate's build,
which the search then leaves untimed. The input and the default builds
(timed with no deadline) and the search's pick, when it is built, are tuned
in full.

Without a GPU, :func:`heuristic` decides: the multiply-and-sum form when the
kernel has one (it exists only for matmuls of fewer than 16 rows, whose
tensor-core form wastes most of each tile), 8 warps for tiles over 8192
elements, one for tiles of 64 or fewer (:data:`SMALL_TILE`) and 4
otherwise, and 3 pipeline stages when there is a for-loop.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from mirage_xdsl.cpus import usable_cpus
from mirage_xdsl.gpu_target import H100
from mirage_xdsl.lowering.triton import TritonKernel
from mirage_xdsl.runtime.cache import default_cache_dir
from mirage_xdsl.runtime.triton_compile import (
    KernelConfig,
    TritonBinary,
    compile_kernel,
    triton_version,
)
from mirage_xdsl.search.budget import past_timing_deadline, timing_deadline

WARPS = (1, 2, 4, 8, 16)
"""Warps per block the autotuner may give a kernel: as few as its largest
tile keeps busy (one element per thread at least), up to 16 for wide rows,
whose loads then are all in flight at once."""
STAGES = (2, 3, 4, 5, 6, 7)
LARGE_TILE = 8192
SHARED_LIMIT = H100.shared_memory_per_block
"""Shared memory an H100 block may use: settings needing more are dropped."""


LATE_COMPILE_SECONDS = 3.0
"""What compiling may still take past the deadline of the search timing a
candidate: a kernel with no setting compiled by then leaves the candidate
untimed (a search keeps to its budget), and a program past it tries only
the ``tl.dot`` forms compiled by then (``program_forms``). On the H100's
host a one-kernel decode attention's ``tl.dot`` form took 11-12 s to
compile and its multiply-and-sum form 1.2; in a 1B decode layer's run a
two-kernel attention candidate timed past its deadline took 17.6 s to
build, tune and time, half its segment's share of the budget."""


SMALL_TILE = 2 * H100.warp_size
"""Elements of a largest tile that one warp holds (two a thread): a combine
over a few values per row (the parts of a FlashDecoding split). On the H100
the batch-8 decode attention's combine, 64 elements a block, took 3.7 µs
with one warp and 7.0-7.2 with two to eight; three more such combines of a
decode-layer run, 2.3-6.6 µs with one warp against 2.8-13.0 with four
(``docs/bench/decode_attention_ceiling_h100.json``,
``docs/bench/kernel_settings_h100.json``)."""


def heuristic(kernel: TritonKernel) -> KernelConfig:
    """The settings used when nothing is measured (see the module docstring)."""
    if kernel.largest_tile <= SMALL_TILE:
        warps = 1
    else:
        warps = 8 if kernel.largest_tile > LARGE_TILE else 4
    return KernelConfig(
        variant=kernel.variants[-1], num_warps=warps, num_stages=_stages(kernel)
    )


def warps_for(kernel: TritonKernel) -> tuple[int, ...]:
    """The warp counts of :data:`WARPS` whose threads the kernel's largest
    tile keeps busy, one element each at least (up to 4 warps always)."""
    threads = max(kernel.largest_tile, 4 * H100.warp_size)
    return tuple(w for w in WARPS if w * H100.warp_size <= threads)


def first_round(kernel: TritonKernel) -> list[KernelConfig]:
    """The settings tuning times first: each form with each warp count of
    :func:`warps_for`, at the stages :func:`heuristic` gives it."""
    stages = _stages(kernel)
    return [
        KernelConfig(variant, warps, stages)
        for variant in kernel.variants
        for warps in warps_for(kernel)
    ]


def second_round(kernel: TritonKernel, best: KernelConfig) -> list[KernelConfig]:
    """The settings tuning times next, given the first round's fastest: its
    form and warps with each other count of :data:`STAGES`, where that form
    pipelines a ``tl.dot`` over a loop (none otherwise). Warps and stages
    are chosen one after the other, not together: the batch-8 decode
    attention's 8-head form, whose first kernel's whole :func:`space` is 30
    settings (10 so), took 22.1 s to tune with all of them on the H100's
    host and 15.2 s so, and ran as fast (41.1 and 40.6 µs). Trying the
    other stages at the two fastest warp counts as well saved less (26.8 s
    against 16.2 in another run, 41.1 µs against 42.0), and nothing on
    other programs (``docs/bench/tune_rounds_h100*.json``)."""
    if best.variant not in kernel.dot_variants or kernel.forloop <= 1:
        return []
    return [
        KernelConfig(best.variant, best.num_warps, stages)
        for stages in STAGES
        if stages != best.num_stages
    ]


def space(kernel: TritonKernel) -> list[KernelConfig]:
    """Every setting the autotuner tries for ``kernel``: each form with each
    warp count of :func:`warps_for`, and with each of :data:`STAGES` where
    the form's loop has a ``tl.dot`` to pipeline (one setting otherwise)."""
    return [
        KernelConfig(variant, warps, stage)
        for variant in kernel.variants
        for warps in warps_for(kernel)
        for stage in (STAGES if variant in kernel.dot_variants else (_stages(kernel),))
    ]


def _stages(kernel: TritonKernel) -> int:
    """Pipeline stages of a kernel's settings when nothing is measured."""
    return 3 if kernel.forloop > 1 else 1


def tune_dir() -> Path | None:
    cuda = default_cache_dir()
    return None if cuda is None else cuda.parent / "triton-tune"


def entry_key(*parts: str) -> str:
    """The name of a tuning-cache entry for ``parts`` (and Triton's version)."""
    h = hashlib.sha256()
    for part in (*parts, triton_version()):
        h.update(part.encode())
        h.update(b"\x1f")
    return h.hexdigest()


NAMELESS = "kernel"
"""What a kernel's own name is replaced by in the text its tuning is keyed by."""


def tune_key(kernel: TritonKernel, gpu: str) -> str:
    """A kernel's tuning-cache key: its text with its name left out (a kernel
    printed the same in another program, whose function names its kernels,
    shares its choice: as in a segment's input and the stages it is searched
    by, or a searched pick and the whole program it is stitched into), its
    grid, its signature and the GPU."""
    text = kernel.text.replace(kernel.name, NAMELESS)
    return entry_key(text, str(kernel.grid), ",".join(kernel.signature), gpu)


def read_entry(name: str) -> dict | None:
    """The JSON entry ``name`` of the tuning cache, if it is there and readable."""
    folder = tune_dir()
    path = None if folder is None else folder / f"{name}.json"
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_entry(name: str, data: dict) -> None:
    """Write the tuning cache's entry ``name`` atomically (an unwritable cache
    only costs tuning again)."""
    folder = tune_dir()
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, folder / f"{name}.json")
    except OSError:
        pass


def cached_choice(kernel: TritonKernel, gpu: str) -> KernelConfig | None:
    """The setting ``kernel`` was tuned to on ``gpu`` before (as this kernel
    or under another name), if one is cached and names one of its forms."""
    data = read_entry(tune_key(kernel, gpu))
    if data is None:
        return None
    try:
        config = KernelConfig(
            kernel.name + data["form"], data["num_warps"], data["num_stages"]
        )
    except (KeyError, TypeError):
        return None
    return config if config.variant in kernel.variants else None


def store_choice(
    kernel: TritonKernel, gpu: str, config: KernelConfig, timings: dict[str, float]
) -> None:
    """Cache ``config`` as ``kernel``'s choice on ``gpu``; its form is kept
    by the suffix to the kernel's name (``""``, ``"_fma"``, ``"_defer"``)."""
    write_entry(
        tune_key(kernel, gpu),
        {
            "form": config.variant.removeprefix(kernel.name),
            "num_warps": config.num_warps,
            "num_stages": config.num_stages,
            "timings_us": timings,
        },
    )


def _compile_one(args: tuple[str, tuple[str, ...], KernelConfig]) -> TritonBinary | str:
    source, signature, config = args
    try:
        return compile_kernel(source, signature, config)
    except Exception as e:  # a setting that does not compile is just not a candidate
        return f"{type(e).__name__}: {e}"


REMEMBERED = 1024
"""Compiled kernels kept in memory (the most recent)."""
_binaries: OrderedDict[tuple[str, tuple[str, ...], KernelConfig], TritonBinary] = (
    OrderedDict()
)
"""By (the module source's digest, kernel signature, settings)."""


LATE = "not compiled by the search's deadline"
"""What :func:`compile_all` gives for a setting it stopped compiling."""


def compile_all(
    source: str,
    jobs: Iterable[tuple[tuple[str, ...], KernelConfig]],
    until: float = math.inf,
) -> list[TritonBinary | str]:
    """Compile many (signature, config) pairs of one module, in parallel
    processes; each distinct pair once, and none compiled before in this
    process again. Those not compiled by ``until`` (a ``time.monotonic()``
    value) are :data:`LATE`, their compilers stopped."""
    digest = hashlib.sha256(source.encode()).hexdigest()
    keys = [(digest, sig, config) for sig, config in jobs]
    todo = list(dict.fromkeys(k for k in keys if k not in _binaries))
    work = [(source, sig, config) for _, sig, config in todo]
    workers = min(len(work), usable_cpus(), 16)
    if workers <= 1:
        fresh = [_compile_one(w) if time.monotonic() < until else LATE for w in work]
    else:
        fresh = _in_processes(work, workers, until)
    compiled = dict(zip(todo, fresh, strict=True))
    out = [compiled[k] if k in compiled else _binaries[k] for k in keys]
    for k, binary in compiled.items():
        if isinstance(binary, TritonBinary):
            _binaries[k] = binary
    while len(_binaries) > REMEMBERED:
        _binaries.popitem(last=False)
    return out


def _in_processes(
    work: list[tuple[str, tuple[str, ...], KernelConfig]], workers: int, until: float
) -> list[TritonBinary | str]:
    """:func:`_compile_one` of each of ``work`` in ``workers`` forked
    processes; what is not done by ``until`` is :data:`LATE`, and the
    processes still compiling are stopped (:data:`LATE_COMPILE_SECONDS` says
    what some forms take)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, wait

    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    futures = [pool.submit(_compile_one, w) for w in work]
    left = None if math.isinf(until) else max(until - time.monotonic(), 0.0)
    done, late = wait(futures, timeout=left)
    if late:  # stop the compilers still at work (Python 3.14 names this)
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
    pool.shutdown(wait=not late, cancel_futures=True)
    return [f.result() if f in done else LATE for f in futures]


def default_settings(kernel: TritonKernel) -> list[KernelConfig]:
    """What a kernel gets when it is not tuned: the :func:`heuristic`
    setting, then its :func:`fallbacks`."""
    return [heuristic(kernel), *fallbacks(heuristic(kernel))]


def pending(
    kernels: list[TritonKernel], gpu: str, late: bool = False
) -> list[tuple[TritonKernel, KernelConfig]]:
    """What :func:`tune` compiles first for these kernels: the cached choice
    of a kernel tuned before on this GPU, else its :func:`first_round`; ``late``
    (past the deadline of the search timing it, ``search.budget.
    timing_until``), only the :func:`heuristic` setting and its
    :func:`fallbacks` (a search keeps to its budget; the program it picks is
    tuned in full when it is built)."""
    out: list[tuple[TritonKernel, KernelConfig]] = []
    for k in kernels:
        hit = cached_choice(k, gpu)
        if hit is not None:
            configs = [hit]
        elif late:
            configs = default_settings(k)
        else:
            configs = first_round(k)
        out += [(k, c) for c in configs]
    return out


Timer = Callable[[TritonKernel, TritonBinary], float]
"""Microseconds one launch of a compiled kernel takes (median, L2 flushed)."""


def _timed(timer: Timer, kernel: TritonKernel, binary: TritonBinary) -> float:
    """The timer's answer; a setting the GPU refuses to launch is never chosen."""
    from mirage_xdsl.runtime.driver import GpuError

    try:
        return timer(kernel, binary)
    except GpuError:
        return float("inf")


def fallbacks(config: KernelConfig) -> list[KernelConfig]:
    """Settings to try, in order, when ``config`` needs too much shared memory:
    fewer pipeline stages first (each stage buffers a copy of the loop's tiles)."""
    return [
        KernelConfig(config.variant, config.num_warps, stages)
        for stages in range(config.num_stages - 1, 0, -1)
    ]


_COMPILE_WITHIN: ContextVar[float] = ContextVar("compile_within", default=math.inf)


@contextmanager
def compiling_within(seconds: float) -> Iterator[None]:
    """Within this, :func:`tune` compiles for at most ``seconds`` from when it
    starts, and leaves out of its choice a kernel with no setting compiled by
    then (where a kernel would otherwise fail the build): for settings that
    are worth trying only if they come cheap."""
    token = _COMPILE_WITHIN.set(seconds)
    try:
        yield
    finally:
        _COMPILE_WITHIN.reset(token)


def tune(
    source: str,
    kernels: list[TritonKernel],
    gpu: str,
    timer: Timer,
    log: Callable[[str], None] | None = None,
) -> dict[str, tuple[KernelConfig, TritonBinary]]:
    """The fastest setting of every kernel (from the cache where it has one):
    the :func:`pending` settings timed, then, for each kernel being tuned,
    its :func:`second_round`. Compiling keeps to the deadline of the search
    timing the kernels (``search.budget.timing_until``), or to
    :func:`compiling_within`: a kernel whose settings are not all compiled
    by then gets the heuristic's, the second round is not started past it,
    and a choice among fewer settings is not kept. A kernel with nothing
    compiled by the deadline gets its heuristic's settings compiled within
    :data:`LATE_COMPILE_SECONDS` more, or fails the build (``RuntimeError``);
    within :func:`compiling_within` it is left out instead."""
    late = past_timing_deadline()
    within = _COMPILE_WITHIN.get()
    optional = not math.isinf(within)
    if optional:
        until = time.monotonic() + within
    else:
        until = timing_deadline()
    # when a kernel with nothing compiled by the deadline must have compiled
    last = until if optional else max(until, time.monotonic()) + LATE_COMPILE_SECONDS
    settings = pending(kernels, gpu, late)
    tuned = {
        k.name
        for k in kernels
        if not late and [c for j, c in settings if j is k] == first_round(k)
    }
    options, cut = _compiled(source, settings, last if late else until)
    tuned -= cut
    if cut and not optional and not late:
        fallback = [
            (k, c)
            for k in kernels
            if k.name in cut and not options.get(k.name)
            for c in default_settings(k)
        ]
        for name, found in _compiled(source, fallback, last)[0].items():
            options[name] = found
    timings: dict[str, dict[str, float]] = {k.name: {} for k in kernels}

    def time_all(k: TritonKernel, found: list[tuple[KernelConfig, TritonBinary]]):
        for c, b in found:
            timings[k.name][c.key()] = _timed(timer, k, b)

    if optional:  # a kernel with nothing compiled in time is left out
        kernels = [k for k in kernels if options.get(k.name)]
    for k in kernels:
        if not options.get(k.name):
            raise RuntimeError(
                f"no setting of kernel '{k.name}' compiled"
                + (" by the search's deadline" if k.name in cut else "")
            )
        if len(options[k.name]) > 1 or k.name in tuned:
            time_all(k, options[k.name])
    more = [
        (k, c)
        for k in kernels
        if k.name in tuned and not past_timing_deadline()
        for c in second_round(k, _fastest(options[k.name], timings[k.name])[0])
    ]
    found_more, cut = _compiled(source, more, until)
    tuned -= cut
    for name, found in found_more.items():
        time_all(next(k for k in kernels if k.name == name), found)
        options[name] += found
    chosen: dict[str, tuple[KernelConfig, TritonBinary]] = {}
    for k in kernels:
        best = _fastest(options[k.name], timings[k.name])
        chosen[k.name] = best
        if k.name in tuned:  # a choice among a few settings is no choice to keep
            store_choice(k, gpu, best[0], timings[k.name])
        if log is not None and timings[k.name]:
            log(
                f"autotune {k.name}: {best[0].key()} "
                f"{timings[k.name][best[0].key()]:.1f} µs (of {len(options[k.name])})"
            )
    return chosen


def _compiled(
    source: str,
    settings: list[tuple[TritonKernel, KernelConfig]],
    until: float = math.inf,
) -> tuple[dict[str, list[tuple[KernelConfig, TritonBinary]]], set[str]]:
    """The settings that compiled within the shared memory a block may use,
    by kernel name, and the kernels of which some setting was not compiled
    by ``until``. Each kernel's :func:`heuristic` setting is compiled first,
    so that it is what a kernel cut by the deadline has."""
    first = sorted(
        range(len(settings)),
        key=lambda i: settings[i][1] != heuristic(settings[i][0]),
    )
    ordered = compile_all(
        source, [(settings[i][0].signature, settings[i][1]) for i in first], until
    )
    binaries: list[TritonBinary | str] = [LATE] * len(settings)
    for i, binary in zip(first, ordered, strict=True):
        binaries[i] = binary
    by_kernel: dict[str, list[tuple[KernelConfig, TritonBinary]]] = {}
    cut: set[str] = set()
    for (k, config), binary in zip(settings, binaries, strict=True):
        if isinstance(binary, TritonBinary) and binary.shared_bytes <= SHARED_LIMIT:
            by_kernel.setdefault(k.name, []).append((config, binary))
        elif binary == LATE:
            cut.add(k.name)
    return by_kernel, cut


def _fastest(
    options: list[tuple[KernelConfig, TritonBinary]], timings: dict[str, float]
) -> tuple[KernelConfig, TritonBinary]:
    """The fastest of ``options`` by ``timings`` (the first where none was timed)."""
    return min(options, key=lambda cb: timings.get(cb[0].key(), math.inf))
