"""Counts of what a search explored, pruned and cut short.

Each block search fills one :class:`Stats`; a kernel-level search adds them
up (:meth:`Stats.add`) for its report (``report.py``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Stats:
    explored: int = 0
    pruned: int = 0
    classes: int = 0
    stopped: bool = False
    capped: bool = False
    unexplored: int = 0
    """Ops of a round that the budget or the class cap cut short, never
    tried: with ``explored``, a lower bound on what the whole search holds
    (what an unpruned search that cannot finish is measured by)."""

    def add(self, other: Stats) -> None:
        self.capped |= other.capped
        self.explored += other.explored
        self.unexplored += other.unexplored
        self.pruned += other.pruned
        self.classes += other.classes
        self.stopped |= other.stopped
