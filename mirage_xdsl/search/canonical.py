"""Canonical forms: build each µGraph once, and name programs stably.

Ops of a graph (kernel or block level) are appended in one canonical
topological order: the lexicographically smallest, comparing ops by
:func:`op_key` (operand positions, kind, attributes). Appending op ``o`` keeps
a canonical prefix canonical exactly when every op placed after ``o``'s
newest operand has a smaller key: otherwise ``o`` could have gone earlier
and the same graph is reached from another prefix. With commutative operands
sorted and duplicate ops refused, every graph is generated once.

:func:`program_key` hashes a program's printed text with the search options,
so the on-disk cache finds it again whatever SSA names the input used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

from mirage_xdsl.search.ugraph import Op


def op_key(op: Op) -> tuple:
    return (op.operands, op.kind, op.attrs)


def in_order(keys: Sequence[tuple], producer: int, key: tuple) -> bool:
    """Whether ``key`` may follow ``keys`` when its newest operand is at ``producer``."""
    return all(k < key for k in keys[producer + 1 :])


def program_key(text: str, options: Mapping[str, object]) -> str:
    payload = json.dumps({"program": text, "options": options}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()
