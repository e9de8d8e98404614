"""One timing at a time per GPU, across the processes of a host.

Two timings side by side on one GPU each see the other's kernels: three
searches timing at once on one H100 returned 0.0 µs for most candidates (the
flushes alone, timed while another process ran, took longer than the
flushes with the calls). So every timing (``timer.GraphTimer``) holds the
GPU's lock: an ``flock`` on a file named by the GPU's UUID in
:func:`lock_dir`, which every process of the host sees, whichever search,
tool or Dask worker it belongs to. The lock is re-entrant within a process
(a thread holding it may take it again; other threads wait), and the holder
writes its pid into the file, so a process kept waiting can say who holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

LOCK_ENV = "MIRAGE_GPU_LOCK_DIR"
WAIT_SECONDS = 600.0
"""How long to wait for a GPU's lock before giving up (a timing holds it
for a second or so; a whole measured selection takes it many times)."""
POLL_SECONDS = 0.05
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class LockTimeout(RuntimeError):
    """A GPU's lock held by another process for longer than the wait."""


def lock_dir() -> Path:
    """``$MIRAGE_GPU_LOCK_DIR``, else ``mirage-xdsl-gpu-locks`` in the
    system's temporary directory (the same for every process of a host)."""
    env = os.environ.get(LOCK_ENV)
    return Path(env) if env else Path(tempfile.gettempdir()) / "mirage-xdsl-gpu-locks"


def device_key(index: int) -> str:
    """A name for CUDA device ``index`` of this process that is the same in
    every process: its UUID, else the physical index behind
    ``CUDA_VISIBLE_DEVICES``."""
    import torch

    uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", ""))
    uuid = uuid.lower().removeprefix("gpu-")
    if UUID.fullmatch(uuid):
        return f"GPU-{uuid}"  # as NVML and nvidia-smi write it
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    ids = [v.strip() for v in visible.split(",") if v.strip()]
    return f"cuda-{ids[index] if index < len(ids) else index}"


_GUARD = threading.Lock()
_HELD: dict[str, tuple[threading.RLock, list[int]]] = {}
"""Per key: the lock of this process's threads, and how deep it is held."""


def _forget() -> None:
    """In a forked child: hold nothing. What the parent held is the
    parent's (its file locks are not the child's to release), and the
    child's thread must not find the parent's lock its own."""
    global _GUARD
    _GUARD = threading.Lock()
    _HELD.clear()


os.register_at_fork(after_in_child=_forget)


@contextlib.contextmanager
def device_lock(key: str, wait: float = WAIT_SECONDS) -> Iterator[None]:
    """Hold GPU ``key``'s lock, against every other process and thread."""
    with _GUARD:
        local, depth = _HELD.setdefault(key, (threading.RLock(), [0]))
    if not local.acquire(timeout=wait):
        raise LockTimeout(f"GPU {key}: another thread kept its lock for {wait:.0f} s")
    try:
        if depth[0]:
            depth[0] += 1
            try:
                yield
            finally:
                depth[0] -= 1
            return
        with _file_lock(key, wait):
            depth[0] = 1
            try:
                yield
            finally:
                depth[0] = 0
    finally:
        local.release()


@contextlib.contextmanager
def _file_lock(key: str, wait: float) -> Iterator[None]:
    directory = lock_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # shared by users: others may lock too
        directory.chmod(0o1777)
    path = directory / f"{key}.lock"
    fd = _open(path)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockTimeout(
                        f"GPU {key}: {holder(fd)} kept its timing lock ({path}) "
                        f"for {wait:.0f} s"
                    ) from None
                time.sleep(POLL_SECONDS)
        with contextlib.suppress(OSError):  # opened read-only: another user's
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _open(path: Path) -> int:
    """The lock file, made writable by every user of the host when this
    process creates it; read-only (enough to lock) when another user made
    it without."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        return os.open(path, os.O_RDONLY)
    with contextlib.suppress(OSError):  # the umask took group and other write
        os.fchmod(fd, 0o666)
    return fd


def holder(fd: int) -> str:
    """Who holds the lock open as ``fd``, as its holder wrote it."""
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return f"process {text}" if text.isdigit() else "another process"
