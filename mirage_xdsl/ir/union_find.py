"""Union-find over hashable keys: which dims of which values must agree.

The search's axis labels and the Triton backend's padded tile shapes both
group tensor dims that an op ties together; this is the one structure they
share.
"""

from __future__ import annotations

from collections.abc import Hashable


class UnionFind:
    """Disjoint sets with path halving; ``union(a, b)`` keeps ``a``'s root."""

    def __init__(self) -> None:
        self.parent: dict[Hashable, Hashable] = {}

    def find(self, x: Hashable) -> Hashable:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: Hashable, b: Hashable) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra
