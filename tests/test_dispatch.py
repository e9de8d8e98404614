"""Search tasks on another executor (search/dispatch.py) and the untrusted
search cache (search/cache.py), without Dask: a thread pool stands in for a
cluster. ``test_dask.py`` runs the same on a local Dask cluster."""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import time
import warnings
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.search import dispatch
from mirage_xdsl.search.cache import Cache
from mirage_xdsl.search.dispatch import Spec, executing, worker_for
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.pool import CHUNK, ONE_BY_ONE, lost
from mirage_xdsl.search.superoptimizer import superoptimize_function
from mirage_xdsl.search.version import code_version
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.workloads import WORKLOADS

OPTIONS = SearchOptions(jobs=1, max_kernels=1, budget=300.0)


def picked(outcome) -> str:
    return module_text(ModuleOp([outcome.function.clone()]))


class Counting(cf.ThreadPoolExecutor):
    """A thread pool that counts what it was given."""

    def __init__(self) -> None:
        super().__init__(2)
        self.submitted: list[str] = []

    def submit(self, fn, /, *args, **kwargs):
        self.submitted.append(args[3].__name__)  # run_remote(spec, bound, clock, fn)
        return super().submit(fn, *args, **kwargs)


def test_another_executor_runs_the_tasks_and_picks_the_same() -> None:
    fn = entry_function(WORKLOADS["gated_mlp"].module(1, 8))
    alone = superoptimize_function(fn, OPTIONS, cache_dir="none")
    with Counting() as pool, executing(pool):
        there = superoptimize_function(fn, OPTIONS, cache_dir="none")
    assert set(pool.submitted) == {"run_chunk"}
    tasks = there.report.tasks[0]
    size = CHUNK if tasks >= ONE_BY_ONE else 1
    assert len(pool.submitted) == math.ceil(tasks / size)
    assert picked(there) == picked(alone)
    assert there.report.best_cost == alone.report.best_cost
    # A task sent away carries the bound known when it was sent; the local
    # search reads the bound as candidates come, so it may skip more.
    assert there.report.explored >= alone.report.explored


@pytest.mark.slow
def test_the_second_depths_tasks_are_made_on_the_workers_and_pick_the_same() -> None:
    """A depth's tasks come from replaying its prefixes (their signatures,
    then each group's extensions): the workers do that too, in order, so
    the main process does not hold the second depth up, and the tasks and
    the pick are those of a search that makes them itself."""
    fn = entry_function(WORKLOADS["rmsnorm_linear"].module(1, 8))
    options = SearchOptions(jobs=1, budget=300.0, bound=False)
    alone = superoptimize_function(fn, options, cache_dir="none")
    with Counting() as pool, executing(pool):
        there = superoptimize_function(fn, options, cache_dir="none")
    assert {"signature_chunk", "extension_chunk"} <= set(pool.submitted)
    assert there.report.tasks == alone.report.tasks and len(alone.report.tasks) == 2
    assert picked(there) == picked(alone)


def test_a_task_carries_the_bound_and_the_deadline_of_its_sender() -> None:
    text = module_text(WORKLOADS["gated_mlp"].module(1, 8))
    spec = Spec(text, OPTIONS, code_version())
    seen = []

    def probe(chunk, worker):
        seen.append((worker.limit.value, worker.clock))
        return chunk

    assert dispatch.run_remote(spec, 2.5e-6, dispatch.wall_offset() + 3.0, probe, [1])
    ((bound, clock),) = seen
    assert bound == 2.5e-6
    assert clock == pytest.approx(3.0, abs=0.01)  # a sender 3 s ahead
    assert worker_for(spec) is worker_for(spec)  # built once per process


def test_a_worker_running_other_code_refuses_the_task() -> None:
    spec = Spec("module {}", OPTIONS, "0123456789abcdef")
    with pytest.raises(RuntimeError, match="code version 0123456789abcdef, but"):
        worker_for(spec)


def test_lost_workers_are_told_from_failed_tasks() -> None:
    class KilledWorker(Exception):  # dask.distributed's, by name
        pass

    assert lost(cf.BrokenExecutor("worker 12 died (SIGKILL)"))
    assert lost(cf.process.BrokenProcessPool("gone"))
    assert lost(KilledWorker("task lost its worker 3 times"))

    class RayActorError(Exception):  # Ray's, by name
        pass

    class ActorDiedError(RayActorError):
        pass

    assert lost(ActorDiedError("the actor died unexpectedly"))
    assert not lost(ValueError("a bug"))


def test_the_cluster_is_no_part_of_the_cache_key() -> None:
    assert SearchOptions(cluster="tcp://a:1").key() == SearchOptions().key()


# --- the cache is not trusted -------------------------------------------------


def _searched(cache: Path):
    fn = entry_function(WORKLOADS["rmsnorm_linear"].module(1, 8))
    first = superoptimize_function(fn, OPTIONS, cache_dir=str(cache))
    (entry,) = cache.glob("*.json")
    return fn, first, entry


def test_a_cached_result_is_verified_and_served(tmp_path) -> None:
    fn, first, _ = _searched(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = superoptimize_function(fn, OPTIONS, cache_dir=str(tmp_path))
    assert again.report.cached and picked(again) == picked(first)


def test_a_cached_program_that_computes_something_else_is_dropped(tmp_path) -> None:
    fn, first, path = _searched(tmp_path)
    entry = json.loads(path.read_text())
    # the same signature, another function: exp(X)·W for RMSNorm(X)·W
    wrong = _text(fn).replace("kernel.rms_norm", "kernel.exp")
    assert "kernel.exp" in wrong
    path.write_text(json.dumps({**entry, "program": wrong}))
    with pytest.warns(UserWarning, match="not equivalent to the input"):
        again = superoptimize_function(fn, OPTIONS, cache_dir=str(tmp_path))
    assert not again.report.cached  # searched again, and cached afresh
    assert picked(again) == picked(first)
    assert json.loads(path.read_text())["program"] == entry["program"]


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda text: text[: len(text) // 2], "not a JSON object"),
        (lambda text: text.replace("block.matmul", "block.matmol"), "cannot be"),
    ],
)
def test_a_damaged_entry_is_dropped_not_served(tmp_path, damage, why) -> None:
    fn, first, path = _searched(tmp_path)
    path.write_text(damage(path.read_text()))
    with pytest.warns(UserWarning, match=why):
        assert Cache(tmp_path).verified(path.stem, _text(fn), OPTIONS) is None
    assert not path.exists()


def test_an_entry_replaced_meanwhile_is_not_removed(tmp_path) -> None:
    _, _, path = _searched(tmp_path)
    good = path.read_bytes()
    with pytest.warns(UserWarning, match="dropped"):
        Cache(tmp_path).drop(path.stem, b"what was read before", "damaged")
    assert path.read_bytes() == good


def _text(fn) -> str:
    return module_text(ModuleOp([fn.clone()]))


def test_the_deadline_holds_on_a_slow_executor() -> None:
    fn = entry_function(WORKLOADS["lora"].module(1, 8))
    options = SearchOptions(jobs=1, max_kernels=1, budget=1.0)
    start = time.monotonic()
    with cf.ThreadPoolExecutor(1) as pool, executing(pool):
        outcome = superoptimize_function(fn, options, cache_dir="none")
    assert outcome.report.stopped == "budget"
    assert time.monotonic() - start < 20


# --- the pass option and the driver flag -------------------------------------


def test_cluster_flag_reaches_each_superoptimize_pass() -> None:
    from xdsl.passes import PassPipeline

    from mirage_xdsl.cli.opt import with_cluster
    from mirage_xdsl.ir.diagnostics import MirageError
    from mirage_xdsl.passes.superoptimize import Superoptimize
    from mirage_xdsl.passes.verify_equivalent import VerifyEquivalentPass

    own = Superoptimize(cluster="tcp://own:1")
    pipeline = PassPipeline(
        (Superoptimize(budget=5), VerifyEquivalentPass("ref.mlir"), own)
    )
    passes = with_cluster(pipeline, "tcp://flag:8786").passes
    assert passes[0] == Superoptimize(budget=5, cluster="tcp://flag:8786")
    assert passes[1:] == pipeline.passes[1:]  # a pass given its own keeps it
    with pytest.raises(MirageError, match="--cluster needs the superoptimize pass"):
        with_cluster(
            PassPipeline((VerifyEquivalentPass("ref.mlir"),)), "tcp://flag:8786"
        )
    with pytest.raises(MirageError, match="option 'cluster': expected a scheduler"):
        Superoptimize(cluster="tcp://a b").options()
    assert Superoptimize(cluster="tcp://a:1").options().cluster == "tcp://a:1"
