"""The GPU timer's bookkeeping, without a GPU: it keeps the GPU busy first
when it has been idle, and only then."""

from __future__ import annotations

from types import SimpleNamespace

from mirage_xdsl.runtime import timer as timer_module
from mirage_xdsl.runtime.timer import GraphTimer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        self.now += 0.001  # every reading moves time on a little
        return self.now


def _fake_timer(monkeypatch) -> tuple[GraphTimer, list[str], Clock]:
    events: list[str] = []
    clock = Clock()
    monkeypatch.setattr(timer_module, "time", clock)
    monkeypatch.setattr(timer_module, "capture_graph", lambda body: body)
    timer = GraphTimer.__new__(GraphTimer)
    timer.torch = SimpleNamespace(
        cuda=SimpleNamespace(synchronize=lambda: events.append("sync"))
    )
    timer.flush_buffer = SimpleNamespace(fill_=lambda v: events.append("fill"))
    timer._last_used = None
    monkeypatch.setattr(
        GraphTimer, "_median_us", lambda self, graph: events.append("timed") or 1.0
    )
    return timer, events, clock


def test_an_idle_timer_spins_the_gpu_up_first(monkeypatch) -> None:
    timer, events, clock = _fake_timer(monkeypatch)
    timer.per_call_us([lambda: None], 1)
    first_timing = events.index("timed")
    assert "sync" in events[:first_timing]  # busy work, waited for, came first
    assert events[:first_timing].count("fill") >= 20

    events.clear()
    timer.per_call_us([lambda: None], 1)  # straight after: no spin
    assert "sync" not in events

    clock.now += timer_module.IDLE_SECONDS + 1  # after a pause: spin again
    events.clear()
    timer.per_call_us([lambda: None], 1)
    assert events.index("sync") < events.index("timed")
