"""``torch.compile(fn, backend="mirage")``.

TorchDynamo splits a program into FX graphs at the points it cannot trace and
hands each graph to this backend. A graph that captures into the kernel
dialect is superoptimized and runs as mirage kernels; a graph that does not
(an op with no kernel-dialect equivalent, dynamic shapes, ...) runs eagerly
in torch, and the reason is logged on the ``mirage_xdsl.torch`` logger. Graphs
on CPU tensors also run eagerly unless ``options={"cpu": "interpret"}`` asks
for the µGraph interpreter (exact, slow: meant for checking).

Options (``torch.compile(..., backend="mirage", options={...})``):

- ``superoptimize``: run the search (default true); false runs the captured
  kernel-level program as it is;
- ``cpu``: ``"eager"`` (default) or ``"interpret"``;
- anything else is passed to :func:`mirage_xdsl.superoptimize`.

The name ``mirage`` is registered through the ``torch_dynamo_backends`` entry
point, so no import is needed; :func:`register` registers it by hand.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch import fx

from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.torch.capture import capture_program
from mirage_xdsl.torch.function import MirageFunction, search
from mirage_xdsl.torch.nodes import CaptureError

log = logging.getLogger("mirage_xdsl.torch")

CPU_MODES = ("eager", "interpret")


@dataclass(frozen=True)
class BackendOptions:
    superoptimize: bool = True
    cpu: str = "eager"
    search: dict[str, Any] = field(default_factory=dict)

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
        return BackendOptions(bool(superoptimize), cpu, options)


def mirage_backend(
    gm: fx.GraphModule,
    example_inputs: Sequence[Any],
    options: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """A TorchDynamo backend: mirage kernels where possible, eager elsewhere."""
    opts = BackendOptions.parse(options)
    try:
        captured = capture_program(gm, example_inputs)
    except CaptureError as e:
        log.warning("mirage: running a graph eagerly: %s", e)
        return gm.forward
    on_cpu = not all(x.is_cuda for x in example_inputs)
    if on_cpu and opts.cpu == "eager":
        log.info("mirage: running a CPU graph eagerly (options cpu='interpret')")
        return gm.forward
    module = captured.module
    if opts.superoptimize:
        module = search(module, **opts.search)
    log.info("mirage: took a graph of %d ops", len(list(gm.graph.nodes)))
    return MirageFunction(captured, module)


def register(name: str = "mirage") -> None:
    """Register the backend under ``name`` (the entry point does this for 'mirage')."""
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if name not in _COMPILER_FNS:
        register_backend(mirage_backend, name=name)


__all__ = ["BackendOptions", "mirage_backend", "register"]
