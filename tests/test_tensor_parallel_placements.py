"""Placements of a shard's captured parameters: replicated, split along one
dim, or joined (several layers' pieces one after another, as the capture
joins sibling linears), and the unsharded program regrouped to read a joined
one shard-major."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mirage_xdsl.semantics.sharding import REPLICATE, Shard, ShardingError  # noqa: E402
from mirage_xdsl.torch.placements import (  # noqa: E402
    Joined,
    parameter_placement,
    regrouped,
)


def test_replicated_split_and_joined() -> None:
    q, k, v = torch.randn(4, 8), torch.randn(4, 4), torch.randn(4, 4)
    full = torch.cat([q, k, v], 1)
    assert parameter_placement(0, full, [full, full]) == REPLICATE
    assert parameter_placement(0, q, list(q.chunk(2, 1))) == Shard(1)
    pieces = [torch.cat([t.chunk(2, 1)[r] for t in (q, k, v)], 1) for r in range(2)]
    joined = parameter_placement(0, full, pieces)
    assert joined == Joined(1, (4, 2, 2))
    assert torch.equal(regrouped(full, joined, 2), torch.cat(pieces, 1))


def test_pieces_of_nothing_are_refused() -> None:
    full = torch.randn(4, 8)
    swapped = list(full.chunk(2, 1))[::-1]
    with pytest.raises(ShardingError, match=r"parameter input #3 \[4, 8\]: the shards"):
        parameter_placement(3, full, swapped)
