"""Stopping a search: signals, a dead worker, a killed process, a shared cache.

A search a signal stops returns the best verified µGraph found so far and
writes nothing to the cache; one its budget stops is cached for that budget;
a search killed outright leaves the cache readable; the
next run completes and caches its result. Each search here is gated MLP at
reduced shapes, two kernels deep: one-kernel candidates are found within a
second, and the second depth keeps it busy for seconds more, long enough to
be interrupted there (the cost bound, which would skip that depth, is off).
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mirage_xdsl.search.cache import LOCK_NAME
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.progress import Progress
from mirage_xdsl.search.superoptimizer import superoptimize_function
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.workloads import WORKLOADS

OPTIONS = dict(max_kernels=2, budget=300.0, bound=False)

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="finds worker processes in /proc"
)


def _program():
    return WORKLOADS["gated_mlp"].module(1, 16)


class _InterruptAtDepthTwo(Progress):
    """Sends this process SIGINT once the search reaches its second depth."""

    def __init__(self) -> None:
        super().__init__(enabled=True)
        self.sent = False

    def update(self, text: str, force: bool = False) -> None:
        if not self.sent and text.startswith("kernels 2/"):
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)


def _entries(cache: Path) -> list[dict]:
    """Every cache entry, parsed: a torn or half-written file fails here."""
    return [json.loads(p.read_text()) for p in sorted(cache.glob("*.json"))]


def _leftovers(cache: Path) -> list[str]:
    return sorted(
        p.name for p in cache.iterdir() if p.suffix != ".json" and p.name != LOCK_NAME
    )


@pytest.mark.parametrize("jobs", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_ctrl_c_returns_the_best_so_far_and_caches_nothing(tmp_path, jobs) -> None:
    fn = entry_function(_program())
    options = SearchOptions(jobs=jobs, **OPTIONS)
    progress = _InterruptAtDepthTwo()
    outcome = superoptimize_function(fn, options, None, str(tmp_path), progress)
    assert progress.sent
    report = outcome.report
    assert report.stopped == "SIGINT"
    # the one-kernel µGraphs of the first depth were verified and kept
    assert report.verified >= 1 and report.kernels_after == 1
    assert report.best_cost < report.input_cost
    assert _entries(tmp_path) == [] and _leftovers(tmp_path) == []

    rerun = superoptimize_function(fn, options, None, str(tmp_path))
    assert not rerun.report.stopped and not rerun.report.cached
    assert len(_entries(tmp_path)) == 1
    assert superoptimize_function(fn, options, None, str(tmp_path)).report.cached


@pytest.mark.slow
def test_a_search_its_budget_stopped_answers_only_as_short_a_budget(tmp_path) -> None:
    fn = entry_function(_program())
    short = SearchOptions(jobs=1, **{**OPTIONS, "budget": 1.0})
    first = superoptimize_function(fn, short, None, str(tmp_path))
    assert first.report.stopped == "budget" and not first.report.cached
    assert [e["budget"] for e in _entries(tmp_path)] == [1.0]
    again = superoptimize_function(fn, short, None, str(tmp_path))
    assert again.report.cached and again.report.stopped == "budget"
    # more time searches again, and the complete result replaces the entry
    longer = SearchOptions(jobs=1, **OPTIONS)
    full = superoptimize_function(fn, longer, None, str(tmp_path))
    assert not full.report.cached and not full.report.stopped
    assert ["budget" in e for e in _entries(tmp_path)] == [False]
    # and answers any budget from then on
    assert superoptimize_function(fn, short, None, str(tmp_path)).report.cached


@pytest.mark.slow
def test_a_longer_search_weighs_the_shorter_ones_pick_as_a_baseline(
    tmp_path, monkeypatch
) -> None:
    """Searching again with more time than a cached, budget-stopped search had
    puts that search's pick in the pool beside the input, so the new answer is
    never one it beat."""
    from xdsl.dialects.builtin import ModuleOp

    from mirage_xdsl.ir.printing import module_text
    from mirage_xdsl.search import superoptimizer
    from mirage_xdsl.search.ugraph import to_module

    given: list = []
    real_pick = superoptimizer.pick

    def pick(*args):
        given.append(inspect.signature(real_pick).bind(*args).arguments["previous"])
        return real_pick(*args)

    monkeypatch.setattr(superoptimizer, "pick", pick)
    fn = entry_function(_program())
    short = SearchOptions(jobs=1, **{**OPTIONS, "budget": 1.0})
    first = superoptimize_function(fn, short, None, str(tmp_path))
    assert first.report.stopped == "budget" and given == [None]
    superoptimize_function(fn, SearchOptions(jobs=1, **OPTIONS), None, str(tmp_path))
    assert len(given) == 2 and given[1] is not None
    assert module_text(to_module(given[1])) == module_text(ModuleOp([first.function]))


SEARCH = textwrap.dedent(
    """
    import json, sys
    from mirage_xdsl.semantics.interpreter import entry_function
    from mirage_xdsl.search.options import SearchOptions
    from mirage_xdsl.search.progress import Progress
    from mirage_xdsl.search.superoptimizer import superoptimize_function
    from mirage_xdsl.workloads import WORKLOADS

    class Announce(Progress):
        def update(self, text, force=False):
            if text.startswith("kernels 2/") and not getattr(self, "said", False):
                self.said = True
                print("DEPTH2", flush=True)

    fn = entry_function(WORKLOADS["gated_mlp"].module(1, 16))
    options = SearchOptions(jobs=2, max_kernels=2, budget=300.0, bound=False)
    outcome = superoptimize_function(fn, options, None, sys.argv[1], Announce(enabled=True))
    r = outcome.report
    print("RESULT", json.dumps([r.stopped or "complete", r.cached, r.kernels_after]))
    """
)


def _start(cache: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SEARCH, str(cache)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_depth_two(proc: subprocess.Popen) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "DEPTH2", line + proc.stderr.read()  # type: ignore[union-attr]


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return sorted(out)


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _result(proc: subprocess.Popen) -> list:
    """[how it ended, whether from the cache, kernels in the result]"""
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    (line,) = [x for x in out.splitlines() if x.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT "))


def _rerun_completes(cache: Path) -> None:
    assert _result(_start(cache)) == ["complete", False, 1]
    assert len(_entries(cache)) == 1
    assert _result(_start(cache)) == ["complete", True, 1]  # from the cache


@pytest.mark.slow  # a killed worker's stop: tests/test_pool.py, in the default run
def test_killed_worker_stops_the_search_and_the_rerun_completes(tmp_path) -> None:
    proc = _start(tmp_path)
    _wait_for_depth_two(proc)
    workers = _children(proc.pid)
    assert len(workers) >= 2
    os.kill(workers[0], signal.SIGKILL)
    # the first depth's one-kernel µGraph is kept
    assert _result(proc) == [f"worker {workers[0]} died (SIGKILL)", False, 1]
    assert _entries(tmp_path) == [] and _leftovers(tmp_path) == []
    _rerun_completes(tmp_path)


def test_terminated_search_returns_its_best(tmp_path) -> None:
    proc = _start(tmp_path)
    _wait_for_depth_two(proc)
    proc.terminate()
    assert _result(proc) == ["SIGTERM", False, 1]
    assert _entries(tmp_path) == [] and _leftovers(tmp_path) == []


@pytest.mark.slow
def test_killed_search_leaves_no_workers_and_the_rerun_completes(tmp_path) -> None:
    proc = _start(tmp_path)
    _wait_for_depth_two(proc)
    workers = _children(proc.pid)
    proc.kill()
    proc.communicate()
    deadline = time.monotonic() + 30  # orphaned workers notice and exit
    while any(_running(w) for w in workers):
        assert time.monotonic() < deadline, "workers outlived the killed search"
        time.sleep(0.1)
    assert _entries(tmp_path) == []
    _rerun_completes(tmp_path)


@pytest.mark.slow
def test_two_searches_share_one_cache(tmp_path) -> None:
    procs = [_start(tmp_path) for _ in range(2)]
    assert [_result(p)[::2] for p in procs] == [["complete", 1]] * 2
    (entry,) = _entries(tmp_path)
    assert entry["report"]["kernels_after"] == 1
    assert _leftovers(tmp_path) == []


POOL_KILL = textwrap.dedent(
    """
    import os, signal, time
    from xdsl.dialects.builtin import ModuleOp
    from mirage_xdsl.semantics.interpreter import entry_function
    from mirage_xdsl.ir.printing import module_text
    from mirage_xdsl.search.options import SearchOptions
    from mirage_xdsl.search.pool import Pool
    from mirage_xdsl.search.worker import init_worker
    from mirage_xdsl.workloads import WORKLOADS

    fn = entry_function(WORKLOADS["gated_mlp"].module(1, 16))
    text = module_text(ModuleOp([fn.clone()]))
    pool = Pool(2, init_worker, (text, SearchOptions(jobs=2), None))
    time.sleep(1.0)  # both idle, waiting for a task
    for p in pool.processes:
        os.kill(p.pid, signal.SIGKILL)
    while not pool.broken:
        time.sleep(0.05)
    pool.terminate()
    print("CLOSED")
    """
)


def test_pool_with_killed_workers_closes_and_exits() -> None:
    # A multiprocessing.Pool worker killed while idle held the task queue's
    # lock, and the pool's terminate then waited for it forever.
    done = subprocess.run(
        [sys.executable, "-c", POOL_KILL], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "CLOSED", done.stderr[-2000:]


def test_cache_directory_follows_mirage_cache_dir(tmp_path, monkeypatch) -> None:
    from mirage_xdsl.search.cache import default_dir

    monkeypatch.setenv("MIRAGE_CACHE_DIR", str(tmp_path))
    assert default_dir() == tmp_path / "superoptimize"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("MIRAGE_CACHE_DIR", "off")
    assert default_dir() is None
    monkeypatch.delenv("MIRAGE_CACHE_DIR")
    assert default_dir() == tmp_path / "xdg" / "mirage-xdsl" / "superoptimize"


def test_mirage_cache_dir_off_keeps_search_results_off_disk(
    tmp_path, monkeypatch
) -> None:
    from mirage_xdsl.ir.builder import new_kernel_graph

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("MIRAGE_CACHE_DIR", "off")
    g = new_kernel_graph("f")
    g.mark_output(g.exp(g.new_input((16, 16))))
    fn = entry_function(g.module())
    options = SearchOptions(jobs=1, max_kernels=1, budget=60.0)
    for _ in range(2):  # the second search finds no entry of the first
        assert not superoptimize_function(fn.clone(), options).report.cached
    assert not any(tmp_path.rglob("*.json"))
