"""One timing at a time per GPU (runtime/device_lock.py), and what other
processes do on it (runtime/gpu_activity.py), without a GPU: two processes
never hold one GPU's lock together, a thread may take its own lock again,
a process kept waiting names the holder; NVML and nvidia-smi answers are
read into who is computing."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pytest

from mirage_xdsl.runtime import gpu_activity
from mirage_xdsl.runtime.device_lock import LockTimeout, device_lock
from mirage_xdsl.runtime.gpu_activity import Activity, nvml_activity, smi_activity


@pytest.fixture(autouse=True)
def lock_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MIRAGE_GPU_LOCK_DIR", str(tmp_path / "locks"))
    return tmp_path


def _hold(key: str, log: str, rounds: int) -> None:
    for _ in range(rounds):
        with device_lock(key):
            with open(log, "a") as f:
                f.write(f"{os.getpid()} in\n")
            time.sleep(0.02)
            with open(log, "a") as f:
                f.write(f"{os.getpid()} out\n")


def test_two_processes_never_time_on_one_gpu_together(lock_dir) -> None:
    log = str(lock_dir / "log")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_hold, args=("GPU-a", log, 10)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    lines = open(log).read().split("\n")[:-1]
    assert len(lines) == 40
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        pid = enter.split()[0]
        assert (enter, leave) == (f"{pid} in", f"{pid} out")  # nobody in between
    assert len({line.split()[0] for line in lines}) == 2


def test_other_gpus_are_not_held_up(lock_dir) -> None:
    with device_lock("GPU-a"), device_lock("GPU-b", wait=0.5):
        pass


def test_a_thread_may_take_its_lock_again_others_wait() -> None:
    order: list[str] = []

    def other() -> None:
        with device_lock("GPU-a"):
            order.append("other")

    with device_lock("GPU-a"):
        with device_lock("GPU-a"):  # the autotuner's timing inside a measure's
            thread = threading.Thread(target=other)
            thread.start()
            time.sleep(0.1)
            order.append("nested")
        time.sleep(0.1)
        order.append("outer")
    thread.join()
    assert order == ["nested", "outer", "other"]


def _hold_long(key: str, ready) -> None:
    with device_lock(key):
        ready.set()
        time.sleep(5)


def test_a_process_kept_waiting_names_the_holder() -> None:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold_long, args=("GPU-a", ready))
    holder.start()
    try:
        assert ready.wait(30)
        with (
            pytest.raises(LockTimeout, match=f"GPU-a: process {holder.pid} kept"),
            device_lock("GPU-a", wait=0.3),
        ):
            pass
    finally:
        holder.kill()
        holder.join()
    with device_lock("GPU-a", wait=5):  # a killed holder's lock is free
        pass


# --- other processes' work ---------------------------------------------------


class FakeNvml:
    """The part of ``pynvml`` that gpu_activity reads."""

    class NVMLError(Exception):
        pass

    class NVMLError_NotFound(NVMLError):  # noqa: N801 (pynvml's name)
        pass

    def __init__(self, samples=None, per_process=True, gpu=0):
        self.samples, self.per_process, self.gpu = samples, per_process, gpu
        self.asked: list[str] = []

    def nvmlDeviceGetHandleByUUID(self, uuid):  # noqa: N802
        self.asked.append(uuid)
        return "handle"

    def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802
        pids = [os.getpid(), 311, 4242]
        return [type("P", (), {"pid": p}) for p in pids]

    def nvmlDeviceGetProcessUtilization(self, handle, since):  # noqa: N802
        if not self.per_process:
            raise self.NVMLError("Not Supported")
        if self.samples is None:
            raise self.NVMLError_NotFound()
        now = int(time.time() * 1e6)
        return [
            type("S", (), {"pid": p, "smUtil": u, "timeStamp": now})
            for p, u in self.samples
        ]

    def nvmlDeviceGetUtilizationRates(self, handle):  # noqa: N802
        return type("U", (), {"gpu": self.gpu})


def test_nvml_names_the_other_processes_computing() -> None:
    nvml = FakeNvml([(os.getpid(), 99), (4242, 60), (311, 0)])
    seen = nvml_activity(nvml, "GPU-1234")
    assert nvml.asked == ["GPU-1234"]
    assert seen.others == ((311, 0.0), (4242, 60.0))  # not this process
    assert seen.processes == (311, 4242)
    assert (
        seen.busy() == "other processes are computing on the GPU (pid 4242 at 60% SM)"
    )


def test_this_process_alone_or_idle_others_are_not_busy() -> None:
    assert nvml_activity(FakeNvml([(os.getpid(), 99)]), "GPU-1").busy() == ""
    # processes that hold a context but ran nothing lately
    idle = nvml_activity(FakeNvml(None), "GPU-1")
    assert idle.others == () and idle.processes == (311, 4242)
    assert idle.busy() == ""


def test_without_per_process_figures_the_whole_gpu_counts() -> None:
    seen = nvml_activity(FakeNvml(per_process=False, gpu=73), "GPU-1")
    assert seen.others is None and seen.utilisation == 73.0
    assert "73% busy" in seen.busy() and "pid 311, pid 4242" in seen.busy()
    assert nvml_activity(FakeNvml(per_process=False, gpu=2), "GPU-1").busy() == ""


def test_nvidia_smi_is_read_when_nvml_is_not_there() -> None:
    asked: list[list[str]] = []

    def run(args):
        asked.append(args)
        if args[0].startswith("--query-gpu"):
            return "41\n"
        return f"{os.getpid()}\n977\n"

    seen = smi_activity(run, "cuda-3")
    assert [a[-1] for a in asked] == ["3", "3"]  # the physical index
    assert seen == Activity("nvidia-smi", None, (977,), 41.0)
    assert "41% busy" in seen.busy()


def test_nothing_known_is_not_called_busy(monkeypatch) -> None:
    def no_nvml():
        raise ImportError("pynvml")

    monkeypatch.setattr(gpu_activity, "_nvml", no_nvml)
    monkeypatch.setattr(gpu_activity.shutil, "which", lambda name: None)
    seen = gpu_activity.activity("GPU-1")
    assert seen == Activity("none") and seen.busy() == ""


def test_a_gpu_is_named_by_its_uuid_as_nvml_writes_it(monkeypatch) -> None:
    import torch

    from mirage_xdsl.runtime import device_lock as module

    uuid = "58FFDB34-3b1c-07d6-5ad5-2b0e6ad0b6e8"
    props = type("Props", (), {"uuid": uuid})
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    assert module.device_key(0) == "GPU-58ffdb34-3b1c-07d6-5ad5-2b0e6ad0b6e8"
    props.uuid = "not a uuid"  # an older torch: the physical index instead
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert module.device_key(1) == "cuda-5"


def test_a_lock_file_another_user_made_read_only_still_locks(
    lock_dir, monkeypatch
) -> None:
    from mirage_xdsl.runtime import device_lock as module

    with device_lock("GPU-a"):  # made by "another user"
        pass
    real_open = os.open

    def no_write(path, flags, *mode):
        if flags & os.O_RDWR:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *mode)

    monkeypatch.setattr(module.os, "open", no_write)
    log = str(lock_dir / "log")
    with device_lock("GPU-a"):
        # forked while this process holds it: the child must wait too
        ctx = multiprocessing.get_context("fork")
        other = ctx.Process(target=_hold, args=("GPU-a", log, 1))
        other.start()
        time.sleep(0.3)
        assert not os.path.exists(log)  # kept out while this one holds it
    other.join(30)
    assert open(log).read().split() == [str(other.pid), "in", str(other.pid), "out"]
