"""What other processes do on a GPU, so a timing they disturb is noticed.

The device lock (``device_lock.py``) keeps our own timings apart, but not a
training job or another user's program. :func:`activity` asks, in turn:

1. NVML (``pynvml``, from the ``nvidia-ml-py`` package), when installed:
   the SM utilisation of each process over the last second
   (``nvmlDeviceGetProcessUtilization``), so this process's own kernels do
   not count, and the processes holding a compute context;
2. ``nvidia-smi``: the GPU's utilisation and its compute processes. The
   utilisation includes this process's own work, so the timer reads it only
   after staying idle for longer than the driver's sampling window
   (``timer.BUSY_WAIT``) before it calls the GPU busy; so does NVML's
   whole-GPU figure, where a GPU keeps no per-process ones.

With neither, nothing is known (``Activity.source == "none"``), and the
timer's sanity checks are what is left.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any

BUSY_PERCENT = 5.0
"""SM utilisation by other processes above which the GPU counts as busy."""
SAMPLE_SECONDS = 1.0
"""How far back per-process samples are read."""
SMI_TIMEOUT = 10.0


@dataclass(frozen=True)
class Activity:
    """Other processes' work on one GPU, as one source saw it."""

    source: str
    """``nvml``, ``nvidia-smi`` or ``none``."""
    others: tuple[tuple[int, float], ...] | None = None
    """(pid, SM %) of other processes that ran kernels lately (NVML, where
    the GPU keeps per-process figures)."""
    processes: tuple[int, ...] = ()
    """Other processes holding a compute context (they may be idle)."""
    utilisation: float | None = None
    """The whole GPU's utilisation in %, this process's work included
    (``nvidia-smi``), when per-process figures are not to be had."""

    def busy(self) -> str:
        """Why the GPU is busy with other processes' work, or empty."""
        if self.others is not None:
            loud = [(p, u) for p, u in self.others if u > 0]
            if sum(u for _, u in loud) > BUSY_PERCENT:
                who = ", ".join(f"pid {p} at {u:.0f}% SM" for p, u in loud)
                return f"other processes are computing on the GPU ({who})"
            return ""
        if self.utilisation is not None and self.utilisation > BUSY_PERCENT:
            who = ", ".join(f"pid {p}" for p in self.processes) or "no process listed"
            return (
                f"the GPU is {self.utilisation:.0f}% busy while this process "
                f"waits ({who})"
            )
        return ""


def activity(key: str) -> Activity:
    """Other processes' work on GPU ``key`` (a ``device_lock.device_key``)."""
    try:
        return nvml_activity(_nvml(), key)
    except Exception:  # no pynvml, no driver library, a GPU NVML cannot see
        pass
    if shutil.which("nvidia-smi"):
        try:
            return smi_activity(_smi, key)
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            pass
    return Activity("none")


@functools.cache
def _nvml() -> Any:
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def nvml_activity(nvml: Any, key: str) -> Activity:
    """:class:`Activity` from the NVML bindings ``nvml`` (``pynvml``)."""
    if key.startswith("GPU-"):
        handle = nvml.nvmlDeviceGetHandleByUUID(key)
    else:
        handle = nvml.nvmlDeviceGetHandleByIndex(int(key.rsplit("-", 1)[-1]))
    me = os.getpid()
    since = int((time.time() - SAMPLE_SECONDS) * 1e6)
    running = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    processes = tuple(sorted({p.pid for p in running} - {me}))
    try:
        samples = nvml.nvmlDeviceGetProcessUtilization(handle, since)
    except nvml.NVMLError_NotFound:  # no process ran a kernel since then
        samples = []
    except nvml.NVMLError:  # no per-process figures on this GPU (MIG, say)
        rates = nvml.nvmlDeviceGetUtilizationRates(handle)
        return Activity("nvml", None, processes, float(rates.gpu))
    by_pid: dict[int, float] = {}
    for s in samples:
        if s.pid != me and s.timeStamp >= since:
            by_pid[s.pid] = max(by_pid.get(s.pid, 0.0), float(s.smUtil))
    return Activity("nvml", tuple(sorted(by_pid.items())), processes)


def smi_activity(run: Any, key: str) -> Activity:
    """:class:`Activity` from ``nvidia-smi``, through ``run(args) -> str``."""
    device = key if key.startswith("GPU-") else key.rsplit("-", 1)[-1]
    util = run(
        ["--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-i", device]
    )
    apps = run(["--query-compute-apps=pid", "--format=csv,noheader", "-i", device])
    pids = {int(line) for line in apps.split() if line.strip().isdigit()}
    return Activity(
        "nvidia-smi",
        processes=tuple(sorted(pids - {os.getpid()})),
        utilisation=float(util.strip().splitlines()[0]),
    )


def _smi(args: list[str]) -> str:
    done = subprocess.run(
        ["nvidia-smi", *args],
        capture_output=True,
        text=True,
        timeout=SMI_TIMEOUT,
        check=True,
    )
    return done.stdout
