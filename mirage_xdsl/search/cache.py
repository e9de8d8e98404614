"""The on-disk result cache, safe to share between processes.

Entries are JSON files named by :func:`search_key`: a hash of the program's
printed text, the search options, what timed the candidates and the version
of the code that searched (``version.py``), so a fixed bug does not keep
serving what the old code chose. Writers take an exclusive
``flock`` on the directory's lock file, write a temporary file in the same
directory and ``os.replace`` it into place, so a reader (shared lock) sees
either the old entry or the new one, never a torn file, and an interrupted
writer leaves only a stray temporary file behind. The rename alone keeps
readers safe where ``flock`` is not shared between machines (a cache
directory on NFS shared by a cluster's workers and its clients).

A cache another machine or another version wrote is not trusted:
:meth:`Cache.verified` checks an entry's program against the input with the
finite-field verifier before serving it (a verdict takes about a second),
and drops an entry that fails, or cannot be read, with a warning, so a stale
or corrupted entry never becomes a wrong kernel.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mirage_xdsl.ir.diagnostics import first_line
from mirage_xdsl.search.canonical import program_key
from mirage_xdsl.search.options import SearchOptions
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
        """The entry under ``key`` as stored, or None (none, or unreadable:
        then dropped with a warning)."""
        read = self._read(key)
        return None if read is None else read[1]

    def verified(
        self, key: str, program: str, options: SearchOptions
    ) -> dict[str, Any] | None:
        """The entry under ``key`` if its ``program`` is equivalent to
        ``program`` (the search's input) by the finite-field verifier; an
        entry that is not, or cannot be parsed, is dropped with a warning."""
        from mirage_xdsl.search.screening import verify_one

        read = self._read(key)
        if read is None:
            return None
        raw, entry = read
        try:
            equivalent, _ = verify_one((entry["program"], program, options))
        except Exception as e:  # any damage to the text: a parse or shape error
            why = f"its program cannot be checked: {type(e).__name__}: {e}"
        else:
            if equivalent:
                return entry
            why = "its program is not equivalent to the input"
        self.drop(key, raw, why)
        return None

    def _read(self, key: str) -> tuple[bytes, dict[str, Any]] | None:
        path = self._path(key)
        if not path.exists():
            return None
        with self._locked(exclusive=False):
            try:
                raw = path.read_bytes()
            except OSError:
                return None
        try:
            entry = json.loads(raw)
        except ValueError:
            entry = None
        if not isinstance(entry, dict):
            self.drop(key, raw, "it is not a JSON object")
            return None
        return raw, entry

    def drop(self, key: str, seen: bytes, why: str) -> None:
        """Remove the entry under ``key`` if it still holds ``seen`` (another
        process may have replaced it meanwhile), warning with ``why``."""
        path = self._path(key)
        warnings.warn(f"search cache: dropped {path}: {first_line(why)}", stacklevel=3)
        with self._locked(exclusive=True), contextlib.suppress(OSError):
            if path.read_bytes() == seen:
                path.unlink()

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
