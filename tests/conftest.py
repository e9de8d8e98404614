"""Test-run setup: empty caches, the package's bytecode, and how pytest-xdist
shares out the tests.

Every run starts from empty caches, as CI's fresh machine does: the search,
cubin and rewrite-library caches live under ``XDG_CACHE_HOME`` (or
``MIRAGE_CACHE_DIR``), and a run that found the user's warm caches would time
and test something else than a fresh checkout, and would write into them.
"""

from __future__ import annotations

import compileall
import os
import re
import shutil
import tempfile
import tomllib
from pathlib import Path

_CACHE_ROOT: str | None = None


ROOT = Path(__file__).resolve().parent.parent


def source_trees() -> set[Path]:
    """The package's source directories, as ``pyproject.toml`` maps them."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        dirs = tomllib.load(f)["tool"]["setuptools"]["package-dir"].values()
    return {ROOT / d for d in dirs}


def pytest_configure(config) -> None:
    global _CACHE_ROOT
    if not hasattr(config, "workerinput"):
        # Byte-compiled once for the run, so that the hundreds of tool processes
        # the tests start (mirage-opt under lit, searches, the CLI tests) load
        # it instead of each compiling the sources again: under
        # PYTHONDONTWRITEBYTECODE no process keeps what it compiled for the next.
        for tree in sorted(source_trees()):
            compileall.compile_dir(tree, quiet=2)
    _CACHE_ROOT = tempfile.mkdtemp(prefix="mirage-test-cache-")
    os.environ["XDG_CACHE_HOME"] = _CACHE_ROOT
    os.environ.pop("MIRAGE_CACHE_DIR", None)


def pytest_unconfigure(config) -> None:
    if _CACHE_ROOT is not None:
        shutil.rmtree(_CACHE_ROOT, ignore_errors=True)


DOC_EXAMPLE = re.compile(r"::test_doc_example\[(?P<page>[^\]:]+\.md):\d+\]$")


def pytest_xdist_make_scheduler(config, log):
    """Tests go to workers one by one, except a documentation page's examples,
    which go together: they share one namespace (``tests/test_docs.py``), so on
    another worker the earlier ones would run again, searches included."""
    from xdist.scheduler import LoadScopeScheduling

    class PagesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            m = DOC_EXAMPLE.search(nodeid)
            return m["page"] if m else nodeid

    return PagesTogether(config, log)


LONGEST = (
    "tests/test_filecheck.py::test_filecheck_suite",
    "tests/test_triton.py::test_interpreted_kernels_match_ours_on_every_workload",
)
"""The default run's longest tests (about 50 and 20 s on two cores), started
first: started last, one would run alone on one worker at the end."""


def pytest_collection_modifyitems(config, items) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST))
