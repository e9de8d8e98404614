"""The package's dependency structure: no import cycles, layers pointing one way.

Every ``import`` in every module counts, including those inside functions and
under ``TYPE_CHECKING``: an import deferred to call time still makes the two
modules depend on each other.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGES = (
    "mirage_xdsl",
    "mirage_xdsl.dialects",
    "mirage_xdsl.lowering",
    "mirage_xdsl.passes",
)
"""Packages whose directories hold the modules (the last three are installed
from their own top-level directories)."""

LAYERS = (
    {"gpu_target", "ops", "cpus"},
    {"dialects"},
    {"ir"},
    {"semantics"},
    {"verify", "workloads"},
    {"search", "rewrites", "fuzz", "layers"},
    {"lowering"},
    {"runtime"},
    {"passes"},
    {"graph", "registry", "universe", "torch", "cli", "<top>"},
)
"""Each subpackage (or top-level module) of ``mirage_xdsl`` by layer, lowest
first. A module may import from its own layer's other members only where no
cycle results, and from lower layers freely; never from a higher layer."""


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if package == "mirage_xdsl" and len(parts) > 0:
                if parts[0] in ("dialects", "lowering", "passes"):
                    continue
            found[name] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports, wherever the import statement is."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                if sub in known:
                    out.add(sub)
                elif module in known:
                    out.add(module)
    out.discard(name)
    return out


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def unit(module: str) -> str:
    """The subpackage (or top-level module) of ``mirage_xdsl`` a module is in."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<top>"


def layer(module: str) -> int:
    name = unit(module)
    for i, members in enumerate(LAYERS):
        if name in members:
            return i
    raise AssertionError(f"{module}: '{name}' is in no layer of LAYERS")


def test_the_scan_sees_the_whole_package() -> None:
    graph = import_graph()
    assert "mirage_xdsl.dialects.kernel" in graph
    assert "mirage_xdsl.lowering.cuda" in graph
    assert "mirage_xdsl.search.pruning.subexpr_oracle" in graph
    # An import inside a function counts.
    assert "mirage_xdsl.search" in graph["mirage_xdsl.graph"]


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_layers_point_one_way() -> None:
    upward = [
        f"{a} imports {b}"
        for a, targets in sorted(import_graph().items())
        for b in sorted(targets)
        if layer(b) > layer(a)
    ]
    assert upward == []


def test_no_cycle_between_subpackages() -> None:
    graph = import_graph()
    units: dict[str, set[str]] = {}
    for a, targets in graph.items():
        units.setdefault(unit(a), set())
        units[unit(a)] |= {unit(b) for b in targets} - {unit(a)}
    for name in {u for ts in units.values() for u in ts}:
        units.setdefault(name, set())
    assert cycles(units) == []


def project_imports(path: Path) -> list[tuple[str, str]]:
    """``(module, name)`` for every ``from mirage_xdsl... import name`` in a file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ""
            if module == "mirage_xdsl" or module.startswith("mirage_xdsl."):
                out += [(module, a.name) for a in node.names]
    return out


ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "path",
    sorted([*ROOT.glob("tools/*.py"), *ROOT.glob("tests/*.py")]),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_tools_and_tests_import_names_that_exist(path: Path) -> None:
    """The scripts no test runs whole (benchmarks, GPU tools) still import only
    what the package has, after a module moved."""
    missing = []
    for module, name in project_imports(path):
        try:
            imported_module = importlib.import_module(module)
        except ImportError as e:
            if e.name and not e.name.startswith("mirage_xdsl"):
                continue  # an optional dependency (torch, cuda-python) is absent
            missing.append(f"{module}: {e}")
            continue
        if not hasattr(imported_module, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{module}.{name}")
    assert missing == []


def test_starting_a_tool_does_not_import_xdsls_interpreters() -> None:
    """``mirage-opt`` and the lowering import the semantic interpreter's module;
    xDSL's own interpreters (every dialect's, RISC-V's among them: a sixth of
    a second) load only when a program is interpreted."""
    code = (
        "import sys, mirage_xdsl.cli.opt, mirage_xdsl.lowering.triton\n"
        "print(sorted(m for m in sys.modules if m.startswith('xdsl.interpreters')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout
