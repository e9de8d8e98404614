"""The GPU timer's bookkeeping and checks, without a GPU (runtime/timer.py):
it keeps the GPU busy first when it has been idle, and only then; it times
the flushes and the calls in turn; a figure at or below zero, a wide spread
or another process computing is measured again, and after the last attempt
raised as ``Unreliable``, never returned."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mirage_xdsl.runtime import timer as timer_module
from mirage_xdsl.runtime.gpu_activity import Activity
from mirage_xdsl.runtime.timer import ATTEMPTS, GraphTimer, Sample, Unreliable


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        self.now += 0.001  # every reading moves time on a little
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


QUIET = Activity("nvml", others=())
BUSY = Activity("nvml", others=((4242, 87.0),), processes=(4242,))


def _fake_timer(monkeypatch, samples=None, activities=None):
    """A timer whose GPU work is recorded in ``events``; ``samples`` are
    what successive timings measure, ``activities`` what the GPU's other
    processes do at each look."""
    events: list[str] = []
    clock = Clock()
    monkeypatch.setattr(timer_module, "time", clock)
    monkeypatch.setattr(timer_module, "capture_graph", lambda body: body)
    monkeypatch.setenv("MIRAGE_GPU_LOCK_DIR", "/tmp/mirage-test-gpu-locks")
    timer = GraphTimer.__new__(GraphTimer)
    timer.torch = SimpleNamespace(
        cuda=SimpleNamespace(synchronize=lambda: events.append("sync"))
    )
    timer.flush_buffer = SimpleNamespace(fill_=lambda v: events.append("fill"))
    timer.key = "GPU-test"
    timer._last_used = None
    timer._whole_gpu = False
    timer.retried = []
    monkeypatch.setattr(timer_module, "_LAST_USE", [-float("inf")])
    samples = iter(samples or [Sample(1.0, 0.9, 1.1)] * 10)
    looks = iter(activities or [QUIET] * 20)

    def paired(self, calls_graph, flush_graph, count):
        events.append("timed")
        return next(samples)

    monkeypatch.setattr(GraphTimer, "_paired_us", paired)
    monkeypatch.setattr(GraphTimer, "activity", lambda self: next(looks))
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


def test_a_figure_at_or_below_zero_is_measured_again(monkeypatch) -> None:
    bad, good = Sample(0.0, -1.0, 0.5), Sample(3.0, 2.9, 3.2)
    timer, events, clock = _fake_timer(monkeypatch, [bad, good])
    assert timer.per_call_us([lambda: None], 1) == 3.0
    assert events.count("timed") == 2
    assert clock.slept == [timer_module.BUSY_WAIT]
    assert timer.retried == [bad.problem()] and "flushes alone" in bad.problem()


def test_no_figure_at_or_below_zero_is_ever_returned(monkeypatch) -> None:
    timer, events, _ = _fake_timer(monkeypatch, [Sample(-0.5, -1, 0.1)] * ATTEMPTS)
    with pytest.raises(Unreliable, match=r"GPU-test: no reliable timing in 3 .*-0\.50"):
        timer.per_call_us([lambda: None], 1)
    assert events.count("timed") == ATTEMPTS


def test_a_wide_spread_is_measured_again() -> None:
    assert Sample(10.0, 4.0, 30.0).problem().startswith("repetitions spread")
    assert Sample(3.0, 1.0, 6.0).problem().startswith("repetitions spread")
    assert Sample(10.0, 9.0, 12.0).problem() == ""
    # a call of 1 us under a 256 MB flush's jitter: wide in ratio, not in us
    assert Sample(1.0, 0.2, 1.9).problem() == ""
    assert Sample(1.0, -0.1, 1.5).problem() == ""


def test_another_process_computing_is_waited_for(monkeypatch) -> None:
    timer, events, clock = _fake_timer(monkeypatch, activities=[BUSY, QUIET, QUIET])
    assert timer.per_call_us([lambda: None], 20) == 1.0
    assert events.count("timed") == 1  # nothing timed while it computed
    assert clock.slept == [timer_module.BUSY_WAIT]
    assert "pid 4242 at 87% SM" in timer.retried[0]


def test_a_gpu_that_stays_busy_gives_no_figure(monkeypatch) -> None:
    timer, events, _ = _fake_timer(monkeypatch, activities=[BUSY] * 10)
    with pytest.raises(Unreliable, match="other processes are computing"):
        timer.per_call_us([lambda: None], 20)
    assert "timed" not in events


def test_work_that_starts_during_a_timing_discards_it(monkeypatch) -> None:
    # quiet before the first timing, busy right after it, then quiet
    timer, events, _ = _fake_timer(monkeypatch, activities=[QUIET, BUSY, QUIET, QUIET])
    timer.per_call_us([lambda: None], 20)
    assert events.count("timed") == 2


class FakeEvent:
    def __init__(self, log: list, clock: list[float]):
        self.log, self.clock = log, clock

    def record(self) -> None:
        self.at = self.clock[0]
        self.log.append("mark")

    def elapsed_time(self, later: FakeEvent) -> float:
        return later.at - self.at  # ms


def test_flushes_and_calls_are_replayed_in_turn() -> None:
    """Each repetition replays the flushes alone, then the calls; its figure
    is the difference, so a slower phase of the GPU affects both alike."""
    log: list[str] = []
    clock = [0.0]
    durations = iter([0.100, 0.103, 0.200, 0.203] * 10)  # ms: flush, calls, ...

    def replay(name):
        def run():
            log.append(name)
            clock[0] += next(durations)

        return SimpleNamespace(replay=run)

    timer = GraphTimer.__new__(GraphTimer)
    timer.reps, timer.warmup = 4, 1
    timer.torch = SimpleNamespace(
        cuda=SimpleNamespace(
            Event=lambda enable_timing: FakeEvent(log, clock),
            synchronize=lambda: None,
        )
    )
    sample = timer._paired_us(replay("calls"), replay("flush"), count=1)
    assert log[:2] == ["flush", "calls"]  # the warm-up, in turn
    assert log[2:7] == ["mark", "flush", "mark", "calls", "mark"]
    # the flushes' time doubled between repetitions; the calls' 3 us did not
    assert sample.median == pytest.approx(3.0)
    assert sample.p10 == pytest.approx(3.0) and sample.p90 == pytest.approx(3.0)


def test_a_whole_gpu_figure_is_read_only_after_this_process_left_it_idle(
    monkeypatch,
) -> None:
    whole = Activity("nvidia-smi", None, (977,), 90.0)  # busy, ours or not
    looks = [whole] * 10
    timer, events, clock = _fake_timer(monkeypatch, activities=looks)
    with pytest.raises(Unreliable, match="90% busy"):
        timer.per_call_us([lambda: None], 20)  # idle before: it counts
    assert "timed" not in events
    timer_module._LAST_USE[0] = clock.now  # straight after our own work
    assert timer.per_call_us([lambda: None], 20) == 1.0
    assert events.count("timed") == 1


def test_a_lock_held_too_long_gives_no_figure(monkeypatch) -> None:
    from mirage_xdsl.runtime.device_lock import LockTimeout

    timer, events, _ = _fake_timer(monkeypatch)

    def held(key):
        raise LockTimeout(f"GPU {key}: process 77 kept its timing lock for 600 s")

    monkeypatch.setattr(timer_module, "device_lock", held)
    with pytest.raises(Unreliable, match="process 77 kept its timing lock"):
        timer.per_call_us([lambda: None], 1)
    assert "timed" not in events
