"""Timing beside another process's work on the same GPU (skipped, with the
reason, where there is no GPU): the timer refuses to give a figure while a
process of matmuls runs beside it, the search's measure warns and hands the
choice to the cost model, and once that process is gone timings come back
positive."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time

import pytest

from mirage_xdsl.runtime.driver import gpu_unavailable_reason

REASON = gpu_unavailable_reason()
if REASON is None and importlib.util.find_spec("torch") is None:
    REASON = "needs torch"
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(REASON is not None, reason=f"{REASON}"),
]

BUSY = """
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
a @ a
torch.cuda.synchronize()
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(10):
        a @ a
    torch.cuda.synchronize()
"""


def _busy_process(seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", BUSY, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_timing_beside_another_process_computing_is_refused() -> None:
    import torch

    from mirage_xdsl.runtime.measure import GpuMeasure
    from mirage_xdsl.runtime.timer import BATCH, BUSY_WAIT, GraphTimer, Unreliable
    from mirage_xdsl.workloads import WORKLOADS

    timer = GraphTimer()
    x = torch.ones(1 << 20, device="cuda")

    def call() -> None:
        x.mul_(1.0)

    assert timer.per_call_us([call], BATCH) > 0  # quiet: a figure
    busy = _busy_process(120)
    try:
        time.sleep(BUSY_WAIT + 0.5)  # the driver's utilisation samples see it
        seen = timer.activity()
        print(f"activity ({seen.source}): {seen}")
        with pytest.raises(Unreliable) as refused:
            timer.per_call_us([call], BATCH)
        print(f"refused: {refused.value}")
        gpu = GpuMeasure()
        module = WORKLOADS["rmsnorm_linear"].module(1, 8)
        gpu.prepare([module])
        with pytest.warns(UserWarning, match="the cost model chooses instead"):
            assert gpu(module) == float("inf")
        assert gpu.fallback
    finally:
        busy.kill()
        busy.wait()
    time.sleep(BUSY_WAIT)
    assert timer.per_call_us([call], BATCH) > 0
