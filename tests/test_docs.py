"""The documentation cannot drift: generated references are in sync and every
code example in ``docs/*.md`` runs.

Examples are fenced blocks. ``pycon`` blocks are doctests (``>>>`` lines and
their expected output); the blocks of one page share one namespace and run in
order. ``console`` blocks hold ``$ command`` lines, run from the project root
with bash, each followed by its expected output, where a line ``...`` stands
for any number of lines and ``...`` inside a line for any text. An HTML comment right before a block,
``<!-- requires: gpu, api:superoptimize -->``, names what the block needs;
when something is missing the block is skipped and the skip says why.
"""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import mirage_xdsl
from mirage_xdsl.registry import ALL_PASSES, ALL_TARGETS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT / "tools"))

from gen_dialect_docs import dialect_docs  # noqa: E402
from gen_pass_docs import pass_docs  # noqa: E402

FENCE = re.compile(
    r"(?:<!--\s*requires:\s*(?P<requires>[^>]*?)\s*-->\s*\n)?"
    r"^```(?P<lang>pycon|console)\n(?P<body>.*?)^```",
    re.M | re.S,
)


def test_dialect_reference_is_in_sync() -> None:
    text = (DOCS / "dialects.md").read_text()
    assert text == dialect_docs(), "run python tools/gen_dialect_docs.py"


def test_pass_reference_is_in_sync() -> None:
    text = (DOCS / "passes.md").read_text()
    assert text == pass_docs(), "run python tools/gen_pass_docs.py"


# --- requirements --------------------------------------------------------------


def _has_gpu() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def missing(requirement: str) -> str | None:
    """Why ``requirement`` is not met here, or None when it is."""
    kind, _, name = requirement.partition(":")
    if kind == "gpu":
        return None if _has_gpu() else "needs an NVIDIA GPU"
    if kind == "dot":
        return None if shutil.which("dot") else "needs Graphviz's dot"
    if kind == "module":
        found = importlib.util.find_spec(name) is not None
        return None if found else f"needs the {name} package"
    if kind == "pass":
        return None if name in ALL_PASSES else f"needs the '{name}' pass"
    if kind == "target":
        return None if name in ALL_TARGETS else f"needs the '{name}' target"
    if kind == "api":
        found = hasattr(mirage_xdsl, name)
        return None if found else f"needs mirage_xdsl.{name}"
    raise ValueError(f"unknown doc requirement '{requirement}'")


# --- examples ------------------------------------------------------------------


@dataclass
class Example:
    path: Path
    line: int
    lang: str
    body: str
    requires: list[str]

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.line}"


def examples() -> list[Example]:
    found = []
    for path in sorted(DOCS.glob("*.md")):
        text = path.read_text()
        for m in FENCE.finditer(text):
            requires = [r.strip() for r in (m["requires"] or "").split(",") if r]
            line = text.count("\n", 0, m.start("body"))
            found.append(Example(path, line, m["lang"], m["body"], requires))
    return found


@dataclass
class Page:
    """The doctest namespace of one page and how far it has run."""

    globs: dict = field(default_factory=dict)
    done: set[int] = field(default_factory=set)


PAGES: dict[Path, Page] = {}
ALL_EXAMPLES = examples()


def run_pycon(example: Example, page: Page) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(
        example.body, page.globs, example.id, str(example.path), example.line
    )
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    out: list[str] = []
    runner.run(test, out=out.append, clear_globs=False)
    page.globs.update(test.globs)  # DocTest runs in a copy of the namespace
    assert runner.failures == 0, "".join(out)


def line_matches(expected: str, actual: str) -> bool:
    """Equal, or equal with each ``...`` inside the line matching any text."""
    if "..." not in expected:
        return expected == actual
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, actual) is not None


def output_matches(expected: list[str], actual: list[str]) -> bool:
    """Line-by-line match where an expected ``...`` line skips any lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(
            output_matches(expected[1:], actual[i:]) for i in range(len(actual) + 1)
        )
    return (
        bool(actual)
        and line_matches(expected[0], actual[0])
        and output_matches(expected[1:], actual[1:])
    )


def run_console(example: Example) -> None:
    commands: list[tuple[str, list[str]]] = []
    for line in example.body.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line.rstrip())
    for command, expected in commands:
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        actual = [line.rstrip() for line in (done.stdout + done.stderr).splitlines()]
        while actual and not actual[-1]:
            actual.pop()
        while expected and not expected[-1]:
            expected.pop()
        assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}"
        assert output_matches(expected, actual), (
            f"{command}: output differs\nexpected:\n"
            + "\n".join(expected)
            + "\nactual:\n"
            + "\n".join(actual)
        )


def run_example(example: Example) -> None:
    """Run one example after the page's earlier runnable ones."""
    page = PAGES.setdefault(example.path, Page())
    for earlier in ALL_EXAMPLES:
        if earlier is example:
            break
        if (
            earlier.path == example.path
            and earlier.lang == "pycon"
            and earlier.line not in page.done
            and not any(missing(r) for r in earlier.requires)
        ):
            run_pycon(earlier, page)
            page.done.add(earlier.line)
    if example.lang == "pycon":
        run_pycon(example, page)
        page.done.add(example.line)
    else:
        run_console(example)


def test_docs_have_examples() -> None:
    pages = {e.path.name for e in ALL_EXAMPLES}
    assert {"index.md", "tutorial.md", "xdsl.md", "torch.md"} <= pages


@pytest.mark.parametrize("example", ALL_EXAMPLES, ids=lambda e: e.id)
def test_doc_example(example: Example) -> None:
    reasons = [why for r in example.requires if (why := missing(r))]
    if reasons:
        pytest.skip(f"{example.id}: " + "; ".join(reasons))
    run_example(example)


# --- the README's first command ------------------------------------------------


def readme_first_command() -> str:
    """The first shell block of the README: install, then the main job."""
    text = (ROOT / "README.md").read_text()
    m = re.search(r"^```sh\n(?P<body>.*?)^```", text, re.M | re.S)
    assert m, "README.md has no sh block"
    return m["body"].strip()


def test_readme_first_command_superoptimizes_and_verifies(tmp_path: Path) -> None:
    """Everything after the install, run in a scratch copy of the examples:
    the search completes, prints its summary and the found µGraph, and the
    verifier accepts it."""
    command = readme_first_command()
    install, _, job = command.partition(" && ")
    assert install.startswith("python3 -m pip install -e .")
    assert "--superoptimize" in job
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", job],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"superoptimize @\w+: .* explored", done.stderr), done.stderr
    # ranked by the cost model, the search's pick; timed on a GPU, the
    # input (the default lowering) may be the fastest and is kept
    timed = re.search(r"measured [\d.]+ us", done.stderr)
    assert "kernel.customized" in done.stdout or timed, done.stderr
    assert "verdict: equivalent" in done.stdout
