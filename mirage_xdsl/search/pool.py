"""Worker processes behind the ``concurrent.futures.Executor`` interface.

The search submits its tasks to an executor and reads their futures in
order (:func:`in_order`), so another executor can take this one's place.
:class:`Pool` exists for what neither ``multiprocessing.Pool`` nor
``ProcessPoolExecutor`` offers through its public interface on Python 3.11:

- :meth:`Pool.terminate` ends the workers at once, mid-task: a search its
  budget or a signal stopped does not wait for the tasks it no longer wants;
- a worker that dies (killed from outside) fails every future not yet done
  with ``BrokenExecutor("worker <pid> died (SIGKILL)")``, naming the worker,
  and the pool ends the others;
- each worker has a pipe of its own, so no lock is shared between
  processes: a worker killed at any point leaves nothing for the others or
  for :meth:`Pool.terminate` to wait on. (A ``multiprocessing.Pool`` worker
  killed while it waited for a task died holding the task queue's lock, and
  the pool's own ``terminate`` then waited for it forever.)

Workers are forked, not spawned: a spawned process re-runs the user's main
script, which need not guard its call to the search. They ignore SIGINT (the
main process decides what Ctrl-C means) and exit when that process is gone.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing import connection
from typing import Any

from threadpoolctl import threadpool_limits

from mirage_xdsl.ir.diagnostics import first_line
from mirage_xdsl.search.budget import Stop

CHUNK = 4
"""Tasks sent to a worker at a time when there are many (:data:`ONE_BY_ONE`
or more): fewer round trips, still balanced."""

ONE_BY_ONE = 1024
"""Fewer items than this go to the workers one at a time. A depth's first
tasks differ most in how long they take: at depth 1 of the masked decode
attention over 1024 keys, 2 of 553 tasks took 2.0 and 1.3 s of the 7.0 s
they took together (one core), and a worker handed such a task with three
others ran 2.5 s, which bounded the depth. Replayed on 16 workers, those
timings finish in 2.4 s in chunks of 4 and in 1.9 s one by one."""

POLL_SECONDS = 0.2
"""How often the main process, waiting on workers, checks for a stop request
and the budget: a task can run long, and Ctrl-C must not wait for it."""


@dataclass(eq=False)
class _Slot:
    """A worker process, the main process's end of its pipe, its job."""

    process: Any  # a forked multiprocessing.Process
    conn: connection.Connection
    future: cf.Future | None = None
    """What it is running (None while idle)."""


class Pool(cf.Executor):
    """``count`` forked processes, each running ``initializer(*initargs)``
    once and then the functions submitted to it, one at a time."""

    def __init__(
        self,
        count: int,
        initializer: Callable[..., object] | None = None,
        initargs: tuple = (),
    ):
        ctx = multiprocessing.get_context("fork")
        self.workers = [_start(ctx, initializer, initargs) for _ in range(count)]
        self.broken = ""
        """Why the pool broke (a worker died), or empty."""
        self._lock = threading.Lock()
        self._pending: deque[tuple[cf.Future, tuple]] = deque()
        self._idle = deque(self.workers)
        self._closing = False
        self._stopped = False
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    @property
    def processes(self) -> list[Any]:
        return [w.process for w in self.workers]

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any):
        future: cf.Future = cf.Future()
        with self._lock:
            if self.broken:
                raise cf.BrokenExecutor(self.broken)
            if self._closing or self._stopped:
                raise RuntimeError("cannot submit to a pool that was shut down")
            self._pending.append((future, (fn, args, kwargs)))
            self._dispatch()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Run what was submitted (or, with ``cancel_futures``, only what
        is running), then let the workers exit."""
        with self._lock:
            self._closing = True
            if cancel_futures:
                for future, _ in self._pending:
                    future.cancel()
                self._pending.clear()
        if wait:
            self._thread.join()
            for p in self.processes:
                p.join()

    def terminate(self) -> None:
        """End every worker now; futures not done fail with ``BrokenExecutor``."""
        with self._lock:
            self._stopped = True
        self._kill()
        self._thread.join()
        for w in self.workers:
            w.conn.close()
        self._fail(self.broken or "the pool was terminated")

    def _dispatch(self) -> None:
        """Hand pending jobs to idle workers (with the lock held)."""
        while self._pending and self._idle:
            future, job = self._pending.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            worker = self._idle.popleft()
            worker.future = future
            try:
                worker.conn.send(job)
            except OSError:
                pass  # a worker that died: its sentinel tells how
            except Exception as e:  # a job that would not pickle
                worker.future = None
                self._idle.appendleft(worker)
                future.set_exception(e)

    def _collect(self) -> None:
        """The pool's thread: results to their futures, the next job to the
        worker that became idle, and a dead worker noticed."""
        replies = {w.conn: w for w in self.workers}
        sentinels = {w.process.sentinel: w for w in self.workers}
        while not self._stopped:
            ready = connection.wait([*replies, *sentinels], timeout=POLL_SECONDS)
            for conn in [r for r in ready if r in replies]:
                if not self._receive(replies[conn]):
                    del replies[conn]  # closed: the worker is gone
            dead = [sentinels[r] for r in ready if r in sentinels]
            if dead and not self._stopped:
                self._kill()
                self.broken = _died(min(dead, key=lambda w: w.process.pid).process)
                self._fail(self.broken)
                return
            if self._closing and self._finished():
                for w in self.workers:
                    with contextlib.suppress(OSError):
                        w.conn.send(None)
                return

    def _receive(self, worker: _Slot) -> bool:
        try:
            ok, value, trace = worker.conn.recv()
        except (EOFError, OSError):
            return False
        except Exception as e:  # a reply that would not unpickle
            ok, value, trace = False, e, ""
        with self._lock:
            future, worker.future = worker.future, None
            self._idle.append(worker)
            self._dispatch()
        if future is None:
            return True
        if ok:
            future.set_result(value)
        else:
            if trace:
                value.__cause__ = RemoteTraceback(trace)
            future.set_exception(value)
        return True

    def _finished(self) -> bool:
        with self._lock:
            return not self._pending and len(self._idle) == len(self.workers)

    def _kill(self) -> None:
        for p in self.processes:
            if p.is_alive():
                p.kill()
        for p in self.processes:
            p.join(timeout=5)

    def _fail(self, reason: str) -> None:
        """Fail every future not done: the pool is gone."""
        with self._lock:
            futures = [w.future for w in self.workers if w.future is not None]
            futures += [future for future, _ in self._pending]
            self._pending.clear()
            for w in self.workers:
                w.future = None
        for future in futures:
            with contextlib.suppress(cf.InvalidStateError):
                future.set_exception(cf.BrokenExecutor(reason))


class RemoteTraceback(Exception):
    """The traceback of an error raised in a worker (its ``__cause__``)."""

    def __str__(self) -> str:
        return f"\n\nin the worker:\n{self.args[0]}"


def _start(ctx: Any, initializer: Callable | None, initargs: tuple) -> _Slot:
    ours, theirs = ctx.Pipe()
    process = ctx.Process(
        target=_serve, args=(theirs, os.getpid(), initializer, initargs), daemon=True
    )
    process.start()
    theirs.close()
    return _Slot(process, ours)


def _serve(
    conn: connection.Connection,
    parent: int,
    initializer: Callable | None,
    initargs: tuple,
) -> None:
    """A worker's life: set up, then run jobs until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _exit_with_parent(parent)
    if initializer is not None:
        initializer(*initargs)
    while (job := _next(conn)) is not None:
        fn, args, kwargs = job
        try:
            reply = (True, fn(*args, **kwargs), "")
        except Exception as e:
            reply = (False, e, traceback.format_exc())
        try:
            conn.send(reply)
        except Exception as e:  # a result or error that would not pickle
            conn.send((False, RuntimeError(f"{type(e).__name__}: {e}"), ""))


def _next(conn: connection.Connection) -> Any:
    try:
        return conn.recv()
    except EOFError:
        return None


def _exit_with_parent(parent: int) -> None:
    """End this worker when the process that started it is gone (killed with
    SIGKILL, say): an orphan would otherwise run its task to the deadline."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _died(process: Any) -> str:
    code = process.exitcode or 0
    how = f"exit {code}"
    if -code in signal.valid_signals():
        how = signal.Signals(-code).name
    return f"worker {process.pid} died ({how})"


def in_order(
    executor: cf.Executor,
    fn: Callable[[list], list],
    items: list,
    stop: Stop,
    deadline: float,
) -> Iterator:
    """``fn`` over ``items`` in chunks of :data:`CHUNK` (one by one when
    there are fewer than :data:`ONE_BY_ONE`), each item's result in order,
    until all are done or the search must stop. A worker lost for good
    stops it too, with the executor's reason (:func:`lost`)."""
    futures: list[cf.Future] = []
    size = CHUNK if len(items) >= ONE_BY_ONE else 1
    try:
        for i in range(0, len(items), size):
            futures.append(executor.submit(fn, items[i : i + size]))
        for future in futures:
            # the clock is read before each result, not only when a wait
            # times out: chunks that finish within a poll of each other never
            # time it out (a masked attention's prefixes were costed 0.9 s
            # past the deadline so, and no candidate was left time to verify)
            while not stop.due(deadline):
                if cf.wait([future], timeout=POLL_SECONDS).done:
                    break
            else:
                return
            yield from future.result()
    except Exception as e:
        if not lost(e):
            raise
        stop.reason = first_line(str(e)) or type(e).__name__
    finally:
        for future in futures:
            future.cancel()


LOST = ("BrokenExecutor", "BrokenProcessPool", "KilledWorker", "RayActorError")
"""Errors that say an executor lost the processes to run a task on: this
pool's and ``ProcessPoolExecutor``'s broken pools, Dask's ``KilledWorker``
(a task whose every retry lost its worker) and Ray's ``RayActorError`` (an
actor of a ``RayExecutor`` died), known by name so that neither need be
imported."""


def lost(error: BaseException) -> bool:
    """Whether ``error`` says the executor lost its workers, rather than a
    task failed."""
    return any(t.__name__ in LOST for t in type(error).__mro__)


def one_blas_thread() -> None:
    """Keep this process's numpy (BLAS, OpenMP) to one thread.

    The search runs one worker process per core, and each screens candidates
    with full-shape matmuls; left alone, every worker's BLAS starts a thread
    per core too. On the 16-core GPU machine that oversubscription made the
    gqa b = 8 search spend 46 s on the first depth instead of finishing both
    in 32 s."""
    threadpool_limits(1)
