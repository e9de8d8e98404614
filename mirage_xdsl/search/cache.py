"""The on-disk result cache, safe to share between processes.

Entries are JSON files named by :func:`search_key`: a hash of the program's
printed text, the search options, what timed the candidates and the version
of the code that searched (``version.py``), so a fixed bug does not keep
serving what the old code chose. Writers take an exclusive
``flock`` on the directory's lock file, write a temporary file in the same
directory and ``os.replace`` it into place, so a reader (shared lock) sees
either the old entry or the new one, never a torn file, and an interrupted
writer leaves only a stray temporary file behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mirage_xdsl.search.canonical import program_key
from mirage_xdsl.search.version import code_version

LOCK_NAME = ".lock"


OFF = ("", "off", "0", "none")
"""Values of ``MIRAGE_CACHE_DIR`` that turn the on-disk caches off."""


def default_dir() -> Path | None:
    """``$MIRAGE_CACHE_DIR/superoptimize`` (None when it is ``off``), else
    under ``$XDG_CACHE_HOME`` or ``~/.cache``: the same variable governs this
    cache as the cubin, autotuning and rewrite-library caches."""
    env = os.environ.get("MIRAGE_CACHE_DIR")
    if env is not None:
        return None if env.lower() in OFF else Path(env) / "superoptimize"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    return Path(base) / "mirage-xdsl" / "superoptimize"


def search_key(
    text: str,
    options: Mapping[str, object],
    measure: str = "",
    version: str | None = None,
) -> str:
    """The key of a search's result: the program, the options that change
    the answer, what timed the candidates (empty: the cost model chose) and
    ``version``, the code's (:func:`version.code_version` when None)."""
    code = code_version(bool(measure)) if version is None else version
    extra = {"measure": measure} if measure else {}
    return program_key(text, {**options, **extra, "code": code})


class Cache:
    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)

    @contextlib.contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / LOCK_NAME, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        if not path.exists():
            return None
        with self._locked(exclusive=False):
            try:
                return json.loads(path.read_text())
            except (OSError, ValueError):
                return None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        with self._locked(exclusive=True):
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump(entry, f, indent=1, sort_keys=True)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self._path(key))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
