"""The version of the code a search result came from, for the cache's key.

A cached result is only as good as the code that found it: a bug fixed in
the generator, the cost model or the verifier must not keep serving what the
old code chose. So the cache key carries a hash of the source of every
package the result depends on (as tinygrad puts a version into its disk
cache's key), computed once per process. A measured result also depends on
the code that lowers and times the candidates.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from collections.abc import Iterable
from pathlib import Path

SEARCHED = (
    "mirage_xdsl.dialects",
    "mirage_xdsl.ir",
    "mirage_xdsl.semantics",
    "mirage_xdsl.verify",
    "mirage_xdsl.search",
)
"""The packages whose code decides what the search finds and picks."""

MEASURED = ("mirage_xdsl.lowering", "mirage_xdsl.runtime")
"""And those whose code decides what a measured pick times."""


def code_version(measured: bool = False) -> str:
    """A hash of the source of :data:`SEARCHED` (and :data:`MEASURED`)."""
    return _version(SEARCHED + (MEASURED if measured else ()))


@functools.cache
def _version(packages: tuple[str, ...]) -> str:
    return source_hash(_directory(p) for p in packages)


def source_hash(directories: Iterable[Path]) -> str:
    """A hash of every ``.py`` file under ``directories``: path and text."""
    h = hashlib.sha256()
    for root in directories:
        for path in sorted(root.rglob("*.py")):
            h.update(f"{root.name}/{path.relative_to(root)}\0".encode())
            h.update(path.read_bytes())
            h.update(b"\0")
    return h.hexdigest()[:16]


def _directory(package: str) -> Path:
    """Where ``package`` lives, found without importing it."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, package
    return Path(next(iter(spec.submodule_search_locations)))
