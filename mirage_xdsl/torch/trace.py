"""Tracing torch code into an ATen-level FX graph, and finding its source lines.

``torch.export`` in strict mode (TorchDynamo) gives an ATen graph whose nodes
carry the user's full call stack, which is what a located error message needs.
Code that Dynamo cannot trace is traced again with ``torch.fx`` symbolic
tracing and then exported non-strictly: the symbolic trace records the stack
of each node, and non-strict export keeps that metadata while lowering the
graph to ATen. Graphs handed over by ``torch.compile`` are already FX graphs
with stack traces, so they take the non-strict path directly.
"""

from __future__ import annotations

import inspect
import linecache
import os
import re
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


class FunctionModule(torch.nn.Module):
    """Wraps a plain function so ``torch.export`` (which wants a module) takes it.

    Modules the function reads from its closure or its globals become
    submodules, so their parameters are the wrapper's and export finds them.
    """

    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self.fn = fn
        for name, module in referenced_modules(fn).items():
            self.add_module(name, module)

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def referenced_modules(fn: Callable[..., Any]) -> dict[str, torch.nn.Module]:
    """The ``nn.Module`` objects ``fn`` names as free variables or globals."""
    try:
        refs = inspect.getclosurevars(fn)
    except (TypeError, ValueError):
        return {}
    named = {**refs.globals, **refs.nonlocals}
    return {
        f"captured_{name}": value
        for name, value in named.items()
        if isinstance(value, torch.nn.Module)
    }


def as_module(fn: Callable[..., Any] | torch.nn.Module) -> torch.nn.Module:
    return fn if isinstance(fn, torch.nn.Module) else FunctionModule(fn)


def program_name(fn: Callable[..., Any] | torch.nn.Module) -> str:
    """The ``func.func`` name for a captured program: the function's own name."""
    if isinstance(fn, FunctionModule):
        fn = fn.fn
    raw = getattr(fn, "__name__", None) or type(fn).__name__
    name = re.sub(r"\W", "_", raw)
    return name if name and not name[0].isdigit() else f"f_{name}"


class _RecordingTracer(fx.Tracer):
    """``torch.fx`` symbolic tracing that keeps each node's Python stack."""

    def __init__(self) -> None:
        super().__init__()
        self.record_stack_traces = True

    def _filter_traceback_frames(
        self, user_stack_summary: traceback.StackSummary
    ) -> traceback.StackSummary:
        # torch keeps only frames below a ``forward``; a plain function has
        # none. Keep them all: source_location() skips torch's own frames.
        return user_stack_summary


def symbolic_trace(module: torch.nn.Module) -> fx.GraphModule:
    """``torch.fx`` trace of a module, or of the function a wrapper holds."""
    root = module.fn if isinstance(module, FunctionModule) else module
    tracer = _RecordingTracer()
    graph = tracer.trace(root)
    return fx.GraphModule(tracer.root, graph, program_name(module))


def export(
    fn: Callable[..., Any] | torch.nn.Module, example_inputs: Sequence[Any]
) -> torch.export.ExportedProgram:
    """An ATen-level ``ExportedProgram`` of ``fn`` on ``example_inputs``."""
    module = as_module(fn)
    args = tuple(example_inputs)
    if isinstance(module, fx.GraphModule):
        return torch.export.export(module, args, strict=False)
    try:
        return torch.export.export(module, args, strict=True)
    except Exception as dynamo_error:
        try:
            traced = symbolic_trace(module)
        except Exception:
            raise dynamo_error from None
        return torch.export.export(traced, args, strict=False)


@dataclass(frozen=True)
class SourceLocation:
    """Where in the user's code a graph node came from."""

    file: str
    line: int
    column: int | None
    text: str

    def __str__(self) -> str:
        col = f":{self.column}" if self.column is not None else ""
        return f"{self.file}:{self.line}{col}"

    def short(self) -> str:
        """``package/module.py:LINE``: the file below its installation dir."""
        file = self.file
        for root in _LIBRARY_DIRS:
            if file.startswith(root):
                file = os.path.join(
                    os.path.basename(root.rstrip(os.sep)), file[len(root) :]
                )
                break
        return f"{file}:{self.line}"


def _package_dirs() -> tuple[str, ...]:
    """Where torch, transformers, mirage_xdsl, the standard library and the
    installed packages live: frames there are not the user's code, and a
    message points past them."""
    import importlib.util

    dirs = [_TORCH_DIR, os.path.dirname(os.path.dirname(__file__)) + os.sep]
    spec = importlib.util.find_spec("transformers")
    if spec is not None and spec.submodule_search_locations:
        dirs += [os.path.join(str(d), "") for d in spec.submodule_search_locations]
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    dirs += [os.path.join(root, d) + os.sep for d in ("dialects", "lowering", "passes")]
    dirs.append(os.path.dirname(os.__file__) + os.sep)  # the standard library
    return tuple(dirs)


def source_location(node: fx.Node) -> SourceLocation | None:
    """The innermost user frame of a node's recorded stack, if there is one.

    Frames inside torch, transformers and mirage_xdsl are not the user's code
    and are skipped; Python 3.11 ``^^^`` markers give the column.
    """
    frames = _node_frames(node)
    return next((f for f in reversed(frames) if not is_library(f.file)), None)


def model_location(node: fx.Node) -> SourceLocation | None:
    """The innermost frame of a node's stack outside torch: the line of the
    model code that made it, even when that code is a library (transformers)."""
    frames = _node_frames(node)
    return frames[-1] if frames else None


def node_location(node: fx.Node) -> SourceLocation | None:
    """The user's line for a node (:func:`source_location`), else the line of
    the model code that made it (:func:`model_location`)."""
    return source_location(node) or model_location(node)


def caller_location() -> SourceLocation | None:
    """The innermost frame of the running Python stack in the user's code:
    where the user called into mirage (``capture``, a compiled model)."""
    for info in traceback.extract_stack()[::-1]:
        if not is_library(info.filename) and info.lineno:
            text = (info.line or "").strip()
            return SourceLocation(info.filename, info.lineno, None, text)
    return None


def _node_frames(node: fx.Node) -> list[SourceLocation]:
    """The frames of a node's recorded stack outside torch, outermost first."""
    lines = (node.meta.get("stack_trace") or "").splitlines()
    frames = []
    for i, line in enumerate(lines):
        m = _FRAME.search(line)
        if m is None or _is_torch_frame(m["file"], m["fn"]):
            continue
        number = int(m["line"])
        text = linecache.getline(m["file"], number).rstrip("\n")
        column = _caret_column(lines[i + 1 : i + 3], text)
        frames.append(SourceLocation(m["file"], number, column, text.strip()))
    return frames


def _is_torch_frame(file: str, function: str) -> bool:
    return file.startswith(_TORCH_DIR) or (
        file == __file__ and function == FunctionModule.forward.__name__
    )


def is_library(file: str) -> bool:
    return file.startswith(_LIBRARY_DIRS) or file.startswith("<frozen")


def _caret_column(following: list[str], source: str) -> int | None:
    """1-based column of the ``^^^`` marker under a traceback's source line."""
    if len(following) < 2 or "^" not in following[1] or not source:
        return None
    shown = following[0]
    shown_indent = len(shown) - len(shown.lstrip())
    source_indent = len(source) - len(source.lstrip())
    return following[1].index("^") - shown_indent + source_indent + 1


_LIBRARY_DIRS = _package_dirs()
