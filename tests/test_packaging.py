"""The wheel's package list names every package of the source tree.

``pyproject.toml`` lists the packages by hand (three of them are installed from
top-level directories), so a new subpackage missing from the list works in an
editable install and fails to import from a built wheel.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def source_packages(package_dir: dict[str, str]) -> set[str]:
    """Every directory with an ``__init__.py`` under each mapped root, by package name."""
    found = set()
    for name, directory in package_dir.items():
        root = ROOT / directory
        for init in root.rglob("__init__.py"):
            parts = init.parent.relative_to(root).parts
            if (
                name == "mirage_xdsl"
                and parts
                and parts[0] in ("dialects", "lowering", "passes")
            ):
                continue
            found.add(".".join((name, *parts)))
    return found


def test_every_source_package_is_listed_in_pyproject():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
        "setuptools"
    ]
    listed = set(setuptools["packages"])
    assert source_packages(setuptools["package-dir"]) == listed
