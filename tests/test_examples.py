"""The examples are in sync with the registry and round-trip byte for byte."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from gen_examples import example_texts  # noqa: E402

from mirage_xdsl.ir.context import make_context  # noqa: E402
from mirage_xdsl.ir.diagnostics import parse  # noqa: E402
from mirage_xdsl.ir.printing import module_text  # noqa: E402

EXAMPLES = sorted((ROOT / "examples").glob("*.mlir"))


def test_examples_match_builders() -> None:
    texts = example_texts()
    assert sorted(texts) == sorted(p.name for p in EXAMPLES)
    for path in EXAMPLES:
        assert path.read_text() == texts[path.name], f"regenerate {path.name}"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_round_trip_is_stable(path: Path) -> None:
    """Each example parses and prints back byte for byte, and its printed text
    does again: the parser and printer ``mirage-opt`` runs, in this process
    (the test below and the FileCheck suite run the tool itself)."""
    ctx = make_context()
    once = module_text(parse(ctx, path.read_text(), path.name))
    twice = module_text(parse(ctx, once, "<printed>"))
    assert once == path.read_text()
    assert twice == once


def test_mirage_opt_prints_an_example_back_byte_for_byte() -> None:
    path = ROOT / "examples" / "gqa_flashdecoding.mlir"
    once = subprocess.run(
        ["mirage-opt", str(path)], capture_output=True, text=True, check=True
    ).stdout
    twice = subprocess.run(
        ["mirage-opt"], input=once, capture_output=True, text=True, check=True
    ).stdout
    assert once == path.read_text()
    assert twice == once


def test_stock_xdsl_opt_parses_our_dialects() -> None:
    out = subprocess.run(
        ["xdsl-opt", str(ROOT / "examples" / "gqa_flashdecoding.mlir")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "kernel.customized" in out and "block.forloop_accum" in out
