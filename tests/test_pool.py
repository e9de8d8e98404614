"""The search's worker pool (search/pool.py): results in order, a worker's
error raised with its traceback, a worker killed from outside named and the
pool broken, the workers ended at once, and :func:`in_order`'s stops."""

from __future__ import annotations

import math
import os
import signal
import time
from concurrent.futures import BrokenExecutor

import pytest

from mirage_xdsl.search.budget import Stop
from mirage_xdsl.search.pool import Pool, in_order


def _square(x: int) -> int:
    return x * x


def _squares(chunk: list[int]) -> list[int]:
    return [x * x for x in chunk]


def _fail(x: int) -> int:
    raise ValueError(f"bad {x}")


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _sleeps(chunk: list[float]) -> list[float]:
    return [_sleep(s) for s in chunk]


def _running(pool: Pool) -> None:
    """Wait until every worker has started (and so may be killed mid-task)."""
    deadline = time.monotonic() + 30
    while not all(p.pid for p in pool.processes):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.2)


def test_results_come_back_in_order() -> None:
    with Pool(2) as pool:
        assert list(pool.map(_square, range(20))) == [x * x for x in range(20)]
    assert all(p.exitcode == 0 for p in pool.processes)


def test_an_error_in_a_worker_is_raised_with_its_traceback() -> None:
    with Pool(1) as pool:
        future = pool.submit(_fail, 3)
        with pytest.raises(ValueError, match="bad 3") as info:
            future.result()
        assert pool.submit(_square, 4).result() == 16  # the worker carries on
    assert "_fail" in str(info.value.__cause__)


def test_a_killed_worker_breaks_the_pool_and_is_named() -> None:
    pool = Pool(2)
    try:
        futures = [pool.submit(_sleep, 60) for _ in range(3)]
        _running(pool)
        victim = pool.processes[0].pid
        os.kill(victim, signal.SIGKILL)
        reason = rf"worker {victim} died \(SIGKILL\)"
        for future in futures:  # running and pending alike
            with pytest.raises(BrokenExecutor, match=reason):
                future.result(timeout=30)
        with pytest.raises(BrokenExecutor, match=reason):
            pool.submit(_square, 1)
    finally:
        pool.terminate()
    assert not any(p.is_alive() for p in pool.processes)


def test_terminate_ends_running_tasks_at_once() -> None:
    pool = Pool(2)
    future = pool.submit(_sleep, 60)
    _running(pool)
    start = time.monotonic()
    pool.terminate()
    assert time.monotonic() - start < 10
    with pytest.raises(BrokenExecutor):
        future.result(timeout=1)
    assert not any(p.is_alive() for p in pool.processes)


def test_shutdown_runs_what_was_submitted_unless_cancelled() -> None:
    pool = Pool(1)
    futures = [pool.submit(_square, i) for i in range(5)]
    pool.shutdown()
    assert [f.result() for f in futures] == [0, 1, 4, 9, 16]
    pool = Pool(1)
    futures = [pool.submit(_sleep, 0.5), *(pool.submit(_square, i) for i in range(3))]
    _running(pool)
    pool.shutdown(cancel_futures=True)
    assert futures[0].result() == 0.5
    assert all(f.cancelled() for f in futures[1:])


def test_in_order_yields_each_item_in_order() -> None:
    stop = Stop()
    with Pool(2) as pool:
        items = list(range(11))
        assert list(in_order(pool, _squares, items, stop, math.inf)) == [
            x * x for x in items
        ]
    assert not stop.reason


def test_in_order_stops_on_request_budget_and_lost_worker() -> None:
    pool = Pool(2)
    try:
        stop = Stop()
        stop.reason = "SIGINT"
        start = time.monotonic()
        assert list(in_order(pool, _sleeps, [60.0] * 8, stop, math.inf)) == []
        assert list(in_order(pool, _sleeps, [60.0] * 8, Stop(), 0.0)) == []
        assert time.monotonic() - start < 10
    finally:
        pool.terminate()

    pool = Pool(2)
    try:
        stop = Stop()
        results = in_order(pool, _sleeps, [60.0] * 8, stop, math.inf)
        _running(pool)
        victim = pool.processes[1].pid
        os.kill(victim, signal.SIGKILL)
        assert list(results) == []
        assert stop.reason == f"worker {victim} died (SIGKILL)"
    finally:
        pool.terminate()


def test_in_order_stops_at_the_deadline_when_results_come_quickly() -> None:
    """Chunks that each finish well within a poll never time the wait out:
    the clock is read before each result all the same. The workers are
    started first, so the deadline does not pass while they start."""
    with Pool(2) as pool:
        assert [pool.submit(_square, x).result() for x in (1, 2)] == [1, 4]
        start = time.monotonic()
        items = [0.02] * 400  # one by one: 4 s on each of two workers
        # a second: on a loaded machine submitting the 400 took over 0.3 s,
        # and the deadline passed before the first result was waited for
        got = list(in_order(pool, _sleeps, items, Stop(), start + 1.0))
        took = time.monotonic() - start
    assert 0 < len(got) < len(items)
    assert took < 2.5  # all 400 take 4 s; a loaded machine may poll late
