"""The search on a local Dask cluster (two worker processes, one thread
each, as ``dask worker --nworkers 2 --nthreads 1`` starts them): the same
pick as the local pool, through the pass's ``cluster`` option and through
``superoptimize(executor=...)``; a worker killed mid-search loses only its
tasks, which the scheduler runs again, and the search completes."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.passes.superoptimize import Superoptimize
from mirage_xdsl.search import dispatch, superoptimize
from mirage_xdsl.search.dispatch import executing
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.superoptimizer import superoptimize_function
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.workloads import WORKLOADS

distributed = pytest.importorskip("distributed")

OPTIONS = dict(jobs=2, max_kernels=1, budget=300.0)


@pytest.fixture(scope="module")
def cluster():
    with (
        distributed.LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            dashboard_address=None,
            worker_dashboard_address=None,
            silence_logs=True,
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        yield cluster, client
        # the client the cluster option opened (one per address and process)
        if dispatch.connect.cache_info().currsize:
            dispatch.connect(cluster.scheduler_address)._client.close()
            dispatch.connect.cache_clear()


def _local(name: str) -> str:
    program = WORKLOADS[name].module(1, 8)
    outcome = superoptimize_function(
        entry_function(program), SearchOptions(**OPTIONS), cache_dir="none"
    )
    return module_text(ModuleOp([outcome.function.clone()]))


def _ran_there(stream) -> int:
    """Tasks of the search that the cluster's workers ran."""
    return sum(t["key"].startswith("run_remote") for t in stream.data)


def test_the_pass_with_a_cluster_picks_what_the_pool_picks(cluster) -> None:
    scheduler, client = cluster
    module = WORKLOADS["rmsnorm_linear"].module(1, 8)
    with distributed.get_task_stream(client) as stream:
        Superoptimize(
            max_kernels=1, jobs=2, cache_dir="none", measure="none",
            cluster=scheduler.scheduler_address,
        ).apply(Context(), module)  # fmt: skip
    assert _ran_there(stream) > 0
    assert module_text(module) == _local("rmsnorm_linear")


@pytest.mark.parametrize(
    "name", ["gated_mlp", pytest.param("lora", marks=pytest.mark.slow)]
)
def test_an_executor_picks_what_the_pool_picks(cluster, name) -> None:
    _, client = cluster
    with distributed.get_task_stream(client) as stream:
        found = superoptimize(
            WORKLOADS[name].module(1, 8),
            executor=client.get_executor(pure=False),
            cache_dir="none",
            log=None,
            **OPTIONS,
        )
    assert _ran_there(stream) > 0
    assert module_text(found) == _local(name)


@pytest.mark.slow
def test_a_worker_killed_mid_search_loses_only_its_tasks(cluster) -> None:
    _, client = cluster
    before = client.run(os.getpid)
    killed: list[int] = []

    def kill_one_busy_worker() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            busy = [w for w, tasks in client.processing().items() if tasks]
            if busy:
                os.kill(before[busy[0]], signal.SIGKILL)
                killed.append(before[busy[0]])
                return
            time.sleep(0.005)

    fn = entry_function(WORKLOADS["lora"].module(1, 8))
    killer = threading.Thread(target=kill_one_busy_worker)
    killer.start()
    with executing(client.get_executor(pure=False)):
        outcome = superoptimize_function(fn, SearchOptions(**OPTIONS), cache_dir="none")
    killer.join()
    assert killed, "no task was seen running"
    assert outcome.report.stopped == ""
    picked = module_text(ModuleOp([outcome.function.clone()]))
    assert picked == _local("lora")
    # the nanny started a new worker in the killed one's place
    client.wait_for_workers(2, timeout=60)
    assert killed[0] not in client.run(os.getpid).values()


def test_mirage_opt_cluster_sends_the_tasks_there(cluster, tmp_path, capsys) -> None:
    from mirage_xdsl.cli.opt import main

    scheduler, client = cluster
    program = tmp_path / "gated_mlp.mlir"
    program.write_text(module_text(WORKLOADS["gated_mlp"].module(1, 8)))
    pipeline = "superoptimize{max_kernels=1 jobs=2 cache_dir=none measure=none}"
    args = ["-p", pipeline, "--cluster", scheduler.scheduler_address, str(program)]
    with distributed.get_task_stream(client) as stream:
        assert main(args) == 0
    assert _ran_there(stream) > 0
    assert capsys.readouterr().out.strip() == _local("gated_mlp").strip()
