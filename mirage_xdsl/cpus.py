"""The host's CPUs this process may use: how many workers and threads to start."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: ``taskset``, a
    container's cpuset), not every CPU of the host."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # no affinity on this platform
        return os.cpu_count() or 1
