"""``torch.compile(model, backend="mirage")``.

TorchDynamo hands this backend each FX graph it traces. The graph is lowered
to ATen (``torch.export``, non-strict) and partitioned
(:mod:`mirage_xdsl.torch.partition`): each maximal subgraph mirage can take
becomes a µGraph (captured, searched, cached by the search, launched as a
:class:`~mirage_xdsl.torch.function.MirageFunction`), and the rest runs as
torch between them. Module parameters arrive as graph inputs and are ordinary
µGraph inputs. The ``mirage_xdsl.torch`` logger gives, per graph, every op
with the line of model code it came from: which µGraph took it, or why it
stays torch. A graph Dynamo traced with symbolic sizes is built for the
concrete sizes of each call (:class:`PerShape`).

Options (``torch.compile(..., backend="mirage", options={...})``):

- ``superoptimize``: run the search on each µGraph (default true); false runs
  the captured kernel-level program as it is;
- ``cpu``: ``"eager"`` (default: CPU graphs run as torch) or ``"interpret"``
  (µGraphs on CPU tensors run in the interpreter, exact and slow: the whole
  path without a GPU);
- ``glue``: how the torch ops between µGraphs run: ``"inductor"`` (default
  for CUDA graphs) compiles them with Inductor, fusing the index math and
  cache writes around the µGraphs, each µGraph an opaque ``mirage::part`` op
  (:mod:`mirage_xdsl.torch.glue`); ``"eager"`` (default for CPU graphs, whose
  Inductor build needs a C++ compiler and takes seconds) runs them one torch
  kernel each. A graph Inductor fails on runs its glue eagerly, with one
  warning line;
- ``dump_dir``: a directory to write each µGraph's program to, as captured
  and as searched (default ``$MIRAGE_DUMP_DIR``; :mod:`mirage_xdsl.torch.dump`),
  for ``mirage-opt`` to read;
- anything else (``budget`` in seconds, ``max_ops``, ...) is passed to
  :func:`mirage_xdsl.superoptimize` for each µGraph.

The name ``mirage`` is registered through the ``torch_dynamo_backends`` entry
point, so no import is needed; :func:`register` registers it by hand.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import fx
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.ir.diagnostics import MirageError, error_line
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.torch.dump import dump_dir, write_program
from mirage_xdsl.torch.function import CALL_OPTIONS, MirageFunction, search
from mirage_xdsl.torch.glue import GLUE_MODES, compile_glue
from mirage_xdsl.torch.nodes import op_name
from mirage_xdsl.torch.partition import Account, Part, fuse, on_cuda, partition
from mirage_xdsl.torch.trace import export, is_library, node_location

log = logging.getLogger("mirage_xdsl.torch")

CPU_MODES = ("eager", "interpret")

_graphs = itertools.count()


@dataclass(frozen=True)
class BackendOptions:
    superoptimize: bool = True
    cpu: str = "eager"
    glue: str | None = None
    """``inductor`` or ``eager``; None: inductor for CUDA graphs, eager for
    CPU ones."""
    search: dict[str, Any] = field(default_factory=dict)
    dump_dir: Path | None = None
    """Where each µGraph's program is written (:mod:`.dump`); None: nowhere."""

    @staticmethod
    def parse(options: dict[str, Any] | None) -> BackendOptions:
        options = dict(options or {})
        superoptimize = options.pop("superoptimize", True)
        cpu = options.pop("cpu", "eager")
        if cpu not in CPU_MODES:
            raise MirageError(
                f"error: backend option 'cpu' must be one of {list(CPU_MODES)}, "
                f"got {cpu!r}"
            )
        glue = options.pop("glue", None)
        if glue is not None and glue not in GLUE_MODES:
            raise MirageError(
                f"error: backend option 'glue' must be one of {list(GLUE_MODES)}, "
                f"got {glue!r}"
            )
        dump = dump_dir(options.pop("dump_dir", None))
        _check_search_options(options)
        return BackendOptions(bool(superoptimize), cpu, glue, options, dump)

    def glue_for(self, cuda: bool) -> str:
        """How the torch ops between µGraphs run for a graph."""
        return self.glue or ("inductor" if cuda else "eager")


def _check_search_options(options: dict[str, Any]) -> None:
    """Refuse, before anything is traced, options the search does not take
    (a misspelt budget was refused by every part's search in turn, each
    part then running as captured)."""
    try:
        from mirage_xdsl.search import option_names
    except ImportError:  # no search installed: superoptimize=False is the way
        return
    known = sorted(option_names() | {*CALL_OPTIONS})
    if unknown := sorted(set(options) - set(known)):
        raise MirageError(
            f"error: unknown backend option(s) {', '.join(map(repr, unknown))}: "
            "the backend takes 'superoptimize', 'cpu', 'glue', 'dump_dir' and "
            f"the search's options ({', '.join(known)})"
        )


def mirage_backend(
    gm: fx.GraphModule,
    example_inputs: Sequence[Any],
    options: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """A TorchDynamo backend: µGraphs where mirage can, torch elsewhere."""
    opts = BackendOptions.parse(options)
    graph = next(_graphs)
    if not on_cuda(example_inputs) and opts.cpu == "eager":
        log.info(
            "mirage: graph %d runs as torch: CPU graph (options cpu='interpret')", graph
        )
        return gm.forward
    if is_dynamic(gm, example_inputs):
        log.info(
            "mirage: graph %d has dynamic shapes: each set of shapes it is called "
            "with is built as a graph of its own",
            graph,
        )
        return PerShape(gm, opts, graph)
    return _build(gm, example_inputs, opts, graph)


def is_dynamic(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> bool:
    """Whether Dynamo traced ``gm`` with symbolic sizes (its automatic dynamic
    shapes, once a size changed between calls, or ``dynamic=True``)."""
    values = [
        n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"
    ]
    return any(
        isinstance(v, torch.SymInt)
        or (
            isinstance(v, torch.Tensor)
            and any(isinstance(d, torch.SymInt) for d in v.shape)
        )
        for v in [*values, *example_inputs]
    )


class PerShape:
    """A graph with symbolic sizes, built for the concrete sizes of each call:
    a µGraph's shapes are fixed, so each new set of input shapes (and integer
    inputs) gets its own build, kept for the calls that repeat it. A decode
    loop calls its step with one set of shapes, so it builds once per prompt
    length, as ``dynamic=False`` would. A graph whose shapes change on every
    call (a cache that grows by a token a step) would build on every call:
    past :attr:`LIMIT` builds, as Dynamo stops recompiling past its own
    limit, further sets of shapes run as torch, said once."""

    LIMIT = 8
    """Builds of one graph at the most (Dynamo's ``recompile_limit``)."""

    def __init__(self, gm: fx.GraphModule, opts: BackendOptions, graph: int):
        self.gm = gm
        self.opts = opts
        self.graph = graph
        self.builds: dict[tuple[Any, ...], Callable[..., Any]] = {}
        self.over = False
        """Whether a call came past :attr:`LIMIT` (said once)."""

    def __call__(self, *args: Any) -> Any:
        key = tuple(
            (tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else a
            for a in args
        )
        run = self.builds.get(key)
        if run is None and len(self.builds) >= self.LIMIT:
            if not self.over:
                log.warning(
                    "mirage: graph %d was called with more than %d sets of "
                    "shapes; further ones run as torch (a static KV cache keeps "
                    "a decode step's shapes fixed)",
                    self.graph,
                    self.LIMIT,
                )
                self.over = True
            return self.gm(*args)
        if run is None:
            run = _build(self.gm, list(args), self.opts, next(_graphs))
            self.builds[key] = run
        return run(*args)


def _build(
    gm: fx.GraphModule,
    example_inputs: Sequence[Any],
    opts: BackendOptions,
    graph: int,
) -> Callable[..., Any]:
    """``gm`` exported at the shapes of ``example_inputs``, partitioned, its
    parts as µGraphs and the rest as torch."""
    try:
        program = export(gm, example_inputs).module()
    except Exception as e:
        first = error_line(e)
        log.warning(
            "mirage: graph %d runs as torch: torch.export refused it: %s%s",
            graph,
            first,
            higher_order(gm),
        )
        return gm.forward
    account = partition(program)
    fuse(program, account.parts, lambda part: _runner(part, opts))
    report(graph, account)
    if opts.glue_for(on_cuda(example_inputs)) == "inductor":
        return compile_glue(program, example_inputs, graph)
    return program


_SEARCHED: dict[tuple[str, str], ModuleOp] = {}
"""Searched programs by part name (a digest of the captured program) and
search options: a model's layers are parts of one program, searched once."""


def _runner(part: Part, opts: BackendOptions) -> MirageFunction:
    """The callable of one µGraph: searched unless the options say not (or
    the search fails, which the log says in one line)."""
    module = part.captured.module
    name = entry_function(module).sym_name.data
    _dump(opts, part, name, module)
    if opts.superoptimize:
        key = (name, repr(sorted(opts.search.items())))
        if key in _SEARCHED:
            log.info("mirage: %s is @%s, searched already", part.name, name)
            return MirageFunction(part.captured, _SEARCHED[key])
        try:
            module = _SEARCHED[key] = search(module, **opts.search)
        except Exception as e:
            why = error_line(e)
            log.warning(
                "mirage: %s runs as captured: its search failed: %s", part.name, why
            )
        else:
            _dump(opts, part, f"{name}.searched", module)
    return MirageFunction(part.captured, module)


def _dump(opts: BackendOptions, part: Part, name: str, module: ModuleOp) -> None:
    """Write ``module`` where the options say, and say where on the log."""
    if opts.dump_dir is None:
        return
    path = write_program(opts.dump_dir, name, module)
    if path is not None:
        log.info("mirage: %s written to %s", part.name, path)


def report(graph: int, account: Account) -> None:
    """Log where each op of the graph runs, with its line of model code."""
    taken = sum(len(p.nodes) for p in account.parts)
    log.info(
        "mirage: graph %d: %d ops as %d µGraphs, %d as torch",
        graph,
        taken,
        len(account.parts),
        len(account.torch),
    )
    for part in account.parts:
        function = entry_function(part.captured.module)
        kernel_ops = sum(1 for op in function.walk() if op.name.startswith("kernel."))
        log.info(
            "mirage:   %s is @%s (%d kernel ops)",
            part.name,
            function.sym_name.data,
            kernel_ops,
        )
        for node in part.nodes:
            log.info("mirage:   %s  %s  %s", part.name, op_name(node), where(node))
    for node, why in account.torch.items():
        log.info("mirage:   torch  %s  %s: %s", op_name(node), where(node), why)


def higher_order(gm: fx.GraphModule) -> str:
    """What of ``gm`` torch.export likely refused: its first higher-order op
    (activation checkpointing's ``tag_activation_checkpoint``, a ``cond``),
    named with its line of model code; empty where it has none."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(
            node.target, torch._ops.HigherOrderOperator
        ):
            return f" (it holds {node.target.name()} at {where(node)})"
    return ""


def where(node: fx.Node) -> str:
    """``file:line `source``` of the model code that made ``node``."""
    loc = node_location(node)
    if loc is None:
        return "(no source line)"
    file = loc.short() if is_library(loc.file) else f"{loc.file}:{loc.line}"
    return f"{file} `{loc.text}`"


def register(name: str = "mirage") -> None:
    """Register the backend under ``name`` (the entry point does this for 'mirage')."""
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if name not in _COMPILER_FNS:
        register_backend(mirage_backend, name=name)


__all__ = ["BackendOptions", "PerShape", "mirage_backend", "register"]
