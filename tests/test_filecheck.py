"""Runs the lit + FileCheck suite in ``tests/filecheck`` as part of pytest."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FILECHECK_DIR = Path(__file__).parent / "filecheck"


def test_filecheck_suite() -> None:
    lit = shutil.which("lit")
    if lit is None or shutil.which("mirage-opt") is None:
        pytest.fail("lit and mirage-opt must be installed (pip install -e '.[dev]')")
    result = subprocess.run(
        [lit, "-q", str(FILECHECK_DIR)], capture_output=True, text=True
    )
    sys.stdout.write(result.stdout + result.stderr)
    assert result.returncode == 0, result.stdout + result.stderr
