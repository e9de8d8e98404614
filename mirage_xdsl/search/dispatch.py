"""Where a search's tasks run: its own process pool, or any executor.

The search hands its tasks to a ``concurrent.futures.Executor``
(:func:`executor_for`): by default its own forked :class:`~pool.Pool`, set
up once per worker from the program's text; with ``cluster`` in the options
(``superoptimize{cluster="tcp://host:8786"}``) a Dask scheduler's
(:func:`connect`); and inside :func:`executing` whatever executor the caller
gave (``superoptimize(..., executor=client.get_executor())``).

Another executor's processes were not forked from the search, so each task
is self-contained (:class:`Remote`): it carries a :class:`Spec` (the
program's text, the options and the version of the code), and the process
running it rebuilds a :class:`~worker.Worker` from that the first time and
keeps it for the search's later tasks. What the forked pool shares through
memory travels with each task instead: the cost bound as it stood when the
task was sent, and the offset of the sender's monotonic clock from the wall
clock, so a task on another machine stops at the search's deadline (the
machines' clocks are assumed NTP-synchronised).

A Dask worker that dies loses only the tasks it was running: the scheduler
runs them again on another worker, and a task that raised is retried
:data:`RETRIES` times. Results are read in the order the tasks were made
(``pool.in_order``), so the pick is the same on a cluster as in the local
pool (``superoptimizer.py``).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import contextvars
import functools
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.pool import Pool, one_blas_thread
from mirage_xdsl.search.version import code_version
from mirage_xdsl.search.worker import Limit, Worker, init_worker

RETRIES = 2
"""Times Dask runs a task again when it raised (a lost worker's tasks are
run again by the scheduler whatever this says)."""

CONNECT_SECONDS = 10
"""How long :func:`connect` waits for the scheduler."""

KEPT_WORKERS = 2
"""Searches whose :class:`Worker` a process (per thread) keeps built."""

_EXECUTOR: contextvars.ContextVar[cf.Executor | None] = contextvars.ContextVar(
    "search_executor", default=None
)


@dataclass(frozen=True)
class Spec:
    """What a process needs to run a search's tasks."""

    text: str
    options: SearchOptions
    version: str
    """:func:`version.code_version` of the sender: a worker running other
    code would find other candidates."""


@dataclass(frozen=True)
class Bound:
    """The cost bound a task was sent with (``Worker.limit`` reads ``value``)."""

    value: float


@contextlib.contextmanager
def executing(executor: cf.Executor | None) -> Iterator[None]:
    """Run the tasks of the searches started inside on ``executor``
    (None: each search's own pool)."""
    token = _EXECUTOR.set(executor)
    try:
        yield
    finally:
        _EXECUTOR.reset(token)


@contextlib.contextmanager
def shared_pool(options: SearchOptions) -> Iterator[None]:
    """One forked pool for every search started inside (a program's segments
    and their stages), where each search would fork its own: forking a
    process that holds torch and a CUDA context takes about a second per
    pool on the GPU machine, which a small segment's share of the budget
    cannot pay. Tasks reach it as on any other executor (:class:`Remote`).
    Nothing changes inside :func:`executing` or with ``cluster``."""
    if _EXECUTOR.get() is not None or options.cluster or options.workers() <= 1:
        yield
        return
    pool = Pool(options.workers())
    try:
        with executing(pool):
            yield
    finally:
        pool.terminate()


def executor_for(
    text: str, options: SearchOptions, limit: Limit | None
) -> cf.Executor | None:
    """The executor a search of ``text`` runs its tasks on, or None to run
    them in this process (one job). It ends with ``terminate()``."""
    outer = _EXECUTOR.get()
    if outer is None and options.cluster:
        outer = connect(options.cluster)
    if outer is not None:
        return Remote(outer, Spec(text, options, code_version()), limit)
    workers = options.workers()
    return Pool(workers, init_worker, (text, options, limit)) if workers > 1 else None


@functools.cache
def connect(address: str) -> cf.Executor:
    """An executor on the Dask scheduler at ``address`` (one client per
    address and process)."""
    try:
        from distributed import Client
    except ImportError:
        raise MirageError(
            f"superoptimize: error: option 'cluster': '{address}' needs "
            "dask.distributed (pip install 'mirage-xdsl[dask]')"
        ) from None
    try:
        client = Client(address, timeout=CONNECT_SECONDS, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise MirageError(
            f"superoptimize: error: option 'cluster': cannot reach the Dask "
            f"scheduler at '{address}': {e}"
        ) from None
    return client.get_executor(pure=False, retries=RETRIES)


class Remote(cf.Executor):
    """Another executor, given self-contained tasks: ``fn(*args)`` runs in
    the executor's process on the :class:`Worker` built there for ``spec``."""

    def __init__(self, executor: cf.Executor, spec: Spec, limit: Limit | None):
        self.executor = executor
        self.spec = spec
        self.limit = limit
        self.futures: list[cf.Future] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any):
        bound = None if self.limit is None else self.limit.value
        future = self.executor.submit(
            run_remote, self.spec, bound, wall_offset(), fn, *args, **kwargs
        )
        self.futures.append(future)
        return future

    def terminate(self) -> None:
        """Cancel what has not run (the executor is the caller's, left open);
        a running task ends by the search's deadline."""
        for future in self.futures:
            future.cancel()
        self.futures.clear()


def wall_offset() -> float:
    """The wall clock minus this machine's monotonic clock."""
    return time.time() - time.monotonic()


# --- in the executor's process -----------------------------------------------

_BUILT = threading.local()


def run_remote(
    spec: Spec,
    bound: float | None,
    sender_offset: float,
    fn: Callable[..., Any],
    *args: Any,
    **kwargs: Any,
) -> Any:
    """``fn(*args)`` (a ``worker.py`` chunk function) on this process's
    :class:`Worker` for ``spec``, with the bound and clock it was sent with."""
    worker = worker_for(spec)
    worker.limit = None if bound is None else Bound(bound)
    worker.clock = sender_offset - wall_offset()
    return fn(*args, worker=worker, **kwargs)


def worker_for(spec: Spec) -> Worker:
    """This thread's :class:`Worker` for ``spec``, built the first time (the
    last :data:`KEPT_WORKERS` searches' are kept)."""
    built: OrderedDict[Spec, Worker] | None = getattr(_BUILT, "workers", None)
    if built is None:
        built = _BUILT.workers = OrderedDict()
        one_blas_thread()
    if spec in built:
        built.move_to_end(spec)
        return built[spec]
    mine = code_version()
    if spec.version != mine:
        raise RuntimeError(
            f"the search runs mirage-xdsl code version {spec.version}, but the "
            f"worker on {socket.gethostname()} runs {mine}: install the same "
            "version on every worker"
        )
    built[spec] = Worker(spec.text, spec.options)
    while len(built) > KEPT_WORKERS:
        built.popitem(last=False)
    return built[spec]
