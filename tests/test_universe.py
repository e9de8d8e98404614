"""The ``xdsl.universe`` plugin: stock ``xdsl-opt`` sees our dialects, passes
and targets, and runs them exactly as ``mirage-opt`` does."""

import os
import re
import subprocess
from pathlib import Path

import pytest
from xdsl.universe import Universe

from mirage_xdsl.ir.context import DIALECTS
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.registry import ALL_PASSES, ALL_TARGETS
from mirage_xdsl.workloads import WORKLOADS


@pytest.fixture(scope="module")
def small_program(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("universe") / "gated_mlp.mlir"
    path.write_text(module_text(WORKLOADS["gated_mlp"].module(1, 64)))
    return str(path)


def run(*argv: str, cache: Path | None = None) -> subprocess.CompletedProcess:
    """``argv``'s output; with ``cache``, the search cache lives there."""
    env = None if cache is None else {**os.environ, "MIRAGE_CACHE_DIR": str(cache)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)


def test_multiverse_holds_every_registry_entry():
    multiverse = Universe.get_multiverse()
    assert set(DIALECTS) <= set(multiverse.all_dialects)
    assert set(ALL_PASSES) <= set(multiverse.all_passes)
    assert set(ALL_TARGETS) <= set(multiverse.all_targets)


def test_xdsl_opt_help_lists_our_passes_and_targets():
    help_text = run("xdsl-opt", "--help").stdout
    flat = "".join(help_text.split())  # argparse wraps long lists at hyphens
    for name in [*ALL_PASSES, *ALL_TARGETS]:
        assert name in flat


SEARCHING_PASSES = {"apply-mirage-rewrites", "superoptimize"}
"""Passes that search (seconds each): with ``-m slow``."""


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow) if n in SEARCHING_PASSES else n
        for n in sorted(ALL_PASSES)
    ],
)
def test_xdsl_opt_runs_each_pass_like_mirage_opt(name, small_program, tmp_path):
    """Each tool gets an empty cache of its own, so xdsl-opt's superoptimize
    searches as mirage-opt's did instead of reading mirage-opt's result."""
    ours = run("mirage-opt", "-p", name, small_program, cache=tmp_path / "ours")
    stock = run("xdsl-opt", "-p", name, small_program, cache=tmp_path / "stock")
    assert (stock.returncode == 0) == (ours.returncode == 0), stock.stderr
    assert stock.stdout == ours.stdout
    if name == "superoptimize":
        for tool in (ours, stock):
            assert re.search(r"@gated_mlp: [1-9]\d* graphs explored", tool.stderr), (
                tool.stderr
            )
            assert "kernel.customized" in tool.stdout


@pytest.mark.parametrize("name", sorted(ALL_TARGETS))
def test_xdsl_opt_emits_each_target_like_mirage_opt(name, small_program):
    ours = run("mirage-opt", "-t", name, small_program)
    stock = run("xdsl-opt", "-t", name, small_program)
    assert (stock.returncode == 0) == (ours.returncode == 0), stock.stderr
    assert stock.stdout == ours.stdout


def test_xdsl_passes_compose_with_our_target(small_program):
    """xDSL's own passes run on kernel programs (our ops are Pure)."""
    piped = run("xdsl-opt", "-p", "cse,canonicalize", "-t", "dot", small_program)
    assert piped.returncode == 0, piped.stderr
    assert "kernel.silu" in piped.stdout
