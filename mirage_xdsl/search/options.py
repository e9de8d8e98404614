"""Search options, shared by the pass, the Python API and the cache key.

Grid and for-loop choices default to sizes derived from the shapes (see
``instantiate.py``); the original project's lists (``griddims``,
``blockdims``, ``imaps``, ``omaps``, ``fmaps``, ``franges``) restrict them when
given. Everything here is plain data so it pickles to worker processes and
hashes into the cache key.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mirage_xdsl.cpus import usable_cpus

Triple = tuple[int, int, int]


@dataclass(frozen=True)
class SearchOptions:
    budget: float = 600.0
    """Seconds; the best µGraph found so far is returned when it runs out."""
    max_ops: int = 9
    """Most compute ops in one block graph (inputs and outputs not counted)."""
    max_kernels: int = 2
    """Most kernel-level ops in a candidate µGraph."""
    max_inputs: int = 4
    """Most device tensors one customized kernel reads."""
    griddims: tuple[Triple, ...] = ()
    blockdims: tuple[Triple, ...] = ()
    imaps: tuple[Triple, ...] = ()
    omaps: tuple[Triple, ...] = ()
    fmaps: tuple[int, ...] = ()
    franges: tuple[int, ...] = ()
    jobs: int = 0
    """Worker processes; 0 means one per core."""
    cluster: str = ""
    """A Dask scheduler's address (``tcp://host:8786``) to run the tasks on
    instead of local worker processes (``dispatch.py``)."""
    prune: bool = True
    """Abstract-expression pruning (off only to measure what it buys)."""
    bound: bool = True
    """Drop deeper prefixes that cannot beat the best µGraph already found by
    the cost model (``bound.py``; off only to measure what it buys)."""
    chain: str = "partial"
    """Which customized kernels may feed another: 'partial' (only split sums,
    as in split-K and FlashDecoding) or 'all'."""
    trials: int = 0
    """Verifier trials per candidate; 0 lets the verifier meet its bound."""
    verify_top: int = 4
    """Verified candidates to collect, cheapest first, before stopping."""
    measure_top: int = 8
    """Verified candidates timed when a measure decides (the input besides)."""
    seed: int = 0
    segment_ops: int = 9
    """Most arithmetic ops searched together: a longer function, or one with
    layout ops, is cut into segments searched one by one (``partition.py``)."""

    def workers(self) -> int:
        return self.jobs if self.jobs > 0 else usable_cpus()

    def key(self) -> dict[str, Any]:
        """What identifies a search result (budget, jobs and cluster do not
        change it when the search completes; a segment's text already shows
        the cut)."""
        out = asdict(self)
        for volatile in ("budget", "jobs", "cluster", "segment_ops"):
            out.pop(volatile)
        return out


DEFAULT = SearchOptions()


def parse_triples(text: str, what: str) -> tuple[Triple, ...]:
    """``"2x16x1;2x16x4"`` or ``"2,16,1;..."`` -> ((2, 16, 1), ...)."""
    out = []
    for item in filter(None, (s.strip() for s in text.split(";"))):
        parts = [p for p in item.replace("x", ",").split(",") if p.strip()]
        try:
            values = tuple(int(p) for p in parts)
        except ValueError:
            raise ValueError(f"option '{what}': cannot read '{item}'") from None
        if len(values) > 3:
            raise ValueError(f"option '{what}': '{item}' has more than 3 entries")
        out.append(
            values + (-1 if what in ("imaps", "omaps") else 1,) * (3 - len(values))
        )
    return tuple(out)  # type: ignore[return-value]


def parse_ints(text: str, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.replace(";", ",").split(",") if p.strip())
    except ValueError:
        raise ValueError(f"option '{what}': expected integers, got '{text}'") from None


__all__ = ["DEFAULT", "SearchOptions", "parse_ints", "parse_triples", "usable_cpus"]
