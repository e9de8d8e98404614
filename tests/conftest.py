"""Every test run starts from empty caches, as CI's fresh machine does.

The search, cubin and rewrite-library caches live under ``XDG_CACHE_HOME``
(or ``MIRAGE_CACHE_DIR``); a run that found the user's warm caches would time
and test something else than a fresh checkout, and would write into them.
"""

from __future__ import annotations

import os
import shutil
import tempfile

_CACHE_ROOT: str | None = None


def pytest_configure(config) -> None:
    global _CACHE_ROOT
    _CACHE_ROOT = tempfile.mkdtemp(prefix="mirage-test-cache-")
    os.environ["XDG_CACHE_HOME"] = _CACHE_ROOT
    os.environ.pop("MIRAGE_CACHE_DIR", None)


def pytest_unconfigure(config) -> None:
    if _CACHE_ROOT is not None:
        shutil.rmtree(_CACHE_ROOT, ignore_errors=True)
