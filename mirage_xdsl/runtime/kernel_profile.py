"""Where a call's device time goes: its kernels under ``torch.profiler``.

The call is made plainly (not in a CUDA graph), an L2 flush before each, so
every kernel reads its operands from memory as it does in a timed call; the
flushes are left out of the figures. Launch gaps are not counted; a kernel
launched early under programmatic dependent launch counts the time it waits
for the one before, so overlapping kernels can sum to more than the call
takes in a CUDA graph.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mirage_xdsl.runtime.timer import FLUSH_BYTES


@dataclass(frozen=True)
class Kernel:
    """One kernel name's launches and device µs per call."""

    name: str
    launches: int
    us: float


@dataclass(frozen=True)
class Profile:
    """Per kernel name, longest first; and one call's kernels in launch order."""

    kernels: list[Kernel]
    sequence: list[tuple[str, float]]

    @property
    def launches(self) -> int:
        return sum(k.launches for k in self.kernels)

    @property
    def us(self) -> float:
        return sum(k.us for k in self.kernels)

    def lines(self, title: str, top: int) -> list[str]:
        """The profile as text: the totals, then the ``top`` longest kernels."""
        out = [
            f"{title}: {self.launches} kernel launches per call, {self.us:.1f} µs "
            f"of kernel time; the {min(top, len(self.kernels))} longest by name:"
        ]
        out += [
            f"  {k.us:8.1f} µs {k.launches:4d}x  {k.name[:90]}"
            for k in self.kernels[:top]
        ]
        return out


def kernel_profile(call: Callable[[], object], calls: int = 5) -> Profile:
    """``call``'s kernels over ``calls`` calls, each after an L2 flush made
    outside the profiled window."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    for _ in range(3):
        call()
    launches: dict[str, int] = {}
    device_us: dict[str, float] = {}
    sequence: list[tuple[str, float]] = []
    for _ in range(calls):
        flush.zero_()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        events = sorted(
            (
                e
                for e in prof.events()
                if e.device_type == torch.autograd.DeviceType.CUDA
            ),
            key=lambda e: e.time_range.start,
        )
        sequence = [(e.name, e.device_time_total) for e in events]
        for name, us in sequence:
            launches[name] = launches.get(name, 0) + 1
            device_us[name] = device_us.get(name, 0.0) + us
    kernels = sorted(
        (Kernel(n, launches[n] // calls, device_us[n] / calls) for n in launches),
        key=lambda k: -k.us,
    )
    return Profile(kernels, sequence)
