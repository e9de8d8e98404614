"""Compiled-module cache: in memory, and on disk across processes.

A cubin depends on the source, the target architecture, the compiler options
and the compiler itself, so the key hashes all four. The disk cache lives under
``$MIRAGE_CACHE_DIR/cuda`` (default ``~/.cache/mirage-xdsl/cuda``); set
``MIRAGE_CACHE_DIR=off`` to keep cubins in memory only. Entries are written to a
temporary file and renamed, so concurrent processes never read half a file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

Compiler = Callable[[str, str, Sequence[str]], tuple[bytes, str, str]]
"""``(source, arch, options) -> (cubin, ptx, log)``, as :func:`compile_cuda`."""


def cache_key(
    source: str, arch: str, options: Sequence[str], compiler_version: str
) -> str:
    """A hex digest naming one compilation."""
    h = hashlib.sha256()
    for part in (compiler_version, arch, "\0".join(options), source):
        h.update(part.encode())
        h.update(b"\x1f")
    return h.hexdigest()


def default_cache_dir() -> Path | None:
    env = os.environ.get("MIRAGE_CACHE_DIR")
    if env is not None:
        return None if env.lower() in ("", "off", "0", "none") else Path(env) / "cuda"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mirage-xdsl" / "cuda"


@dataclass
class CubinCache:
    """Cubins by :func:`cache_key`, kept in memory and (optionally) on disk."""

    directory: Path | None = field(default_factory=default_cache_dir)
    memory: dict[str, bytes] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0

    def _path(self, key: str) -> Path | None:
        return None if self.directory is None else self.directory / f"{key}.cubin"

    def get(self, key: str) -> bytes | None:
        if key in self.memory:
            self.hits += 1
            return self.memory[key]
        path = self._path(key)
        if path is not None and path.is_file():
            data = path.read_bytes()
            if data:
                self.memory[key] = data
                self.hits += 1
                return data
        return None

    def put(self, key: str, cubin: bytes) -> None:
        self.memory[key] = cubin
        path = self._path(key)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(cubin)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only or full disk only costs a recompilation later

    def compile(
        self,
        compiler: Compiler,
        compiler_version: str,
        source: str,
        arch: str,
        options: Sequence[str] = (),
    ) -> bytes:
        """The cubin for ``source``, compiled only on a miss."""
        key = cache_key(source, arch, options, compiler_version)
        cubin = self.get(key)
        if cubin is None:
            self.misses += 1
            cubin = compiler(source, arch, options)[0]
            self.put(key, cubin)
        return cubin


_default: CubinCache | None = None


def default_cache() -> CubinCache:
    """The process-wide cache (created on first use, so the env is read late)."""
    global _default
    if _default is None:
        _default = CubinCache()
    return _default
