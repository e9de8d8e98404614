"""Calling a µGraph from torch: :class:`MirageFunction` and :func:`superoptimize`.

A ``MirageFunction`` holds a captured program after the search. On CUDA
tensors it runs the generated kernels (``mirage_xdsl.compile``, built once on
first call); on CPU tensors it runs the µGraph in the interpreter, with the
GPU's partition semantics and fp32 accumulation, which is slow but exact and
lets the whole path be checked without a GPU.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_unflatten
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.lowering.aliases import ALIGN_BYTES
from mirage_xdsl.search.report import Report
from mirage_xdsl.torch.capture import Captured, capture_program
from mirage_xdsl.torch.nodes import DTYPES, torch_dtype
from mirage_xdsl.torch.views import Output, returned_views, take


class MirageFunction:
    """A captured (and usually superoptimized) program, callable on tensors."""

    def __init__(
        self,
        captured: Captured,
        module: ModuleOp | None = None,
        reports: Sequence[Report] = (),
    ):
        self.captured = captured
        self.module, self._outputs = returned_views(
            module if module is not None else captured.module
        )
        """The program that runs: a returned slice of a kernel's result is
        returned whole and sliced in torch (``views.py``)."""
        self.reports = list(reports)
        """What the search did, one report per function or segment searched
        (``Report.function`` names it: ``forward_s2`` is segment 2)."""
        self._compiled: Callable[..., Any] | None = None
        self._parameters: dict[torch.device, list[torch.Tensor]] = {}
        from mirage_xdsl.semantics.interpreter import entry_function

        self._input_types = entry_function(self.module).function_type.inputs.data
        """The program's input types, which every call is checked against."""

    def __call__(self, *inputs: torch.Tensor) -> Any:
        outs = take(self.raw(*inputs), self._outputs)
        for i, dtype in enumerate(self.captured.out_dtypes):
            if outs[i].dtype != dtype:  # cast at the end, in torch
                outs[i] = outs[i].to(dtype)
        return tree_unflatten(outs, self.captured.out_spec)

    def raw(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        """The outputs of the program that runs, from which :attr:`views`
        takes the captured program's."""
        args = [*map(dense, inputs), *self._parameters_on(self._device(inputs))]
        args = self._masks_as_numbers(args)
        self._check(args)
        if args[0].is_cuda:
            return list(self._run_compiled(args))
        return self._run_interpreted(args)

    @property
    def views(self) -> list[Output]:
        """Per output of the captured program: the output of the program that
        runs it is a view of, and the views."""
        return list(self._outputs)

    def _device(self, inputs: Sequence[torch.Tensor]) -> torch.device:
        devices = {x.device for x in inputs if isinstance(x, torch.Tensor)}
        if len(devices) != 1:
            raise MirageError(
                f"error: inputs must all be tensors on one device, got {devices}"
            )
        return devices.pop()

    def _parameters_on(self, device: torch.device) -> list[torch.Tensor]:
        if device not in self._parameters:
            self._parameters[device] = [p.to(device) for p in self.captured.parameters]
        return self._parameters[device]

    def _check(self, args: Sequence[torch.Tensor]) -> None:
        types = self._input_types
        if len(args) != len(types):
            raise MirageError(
                f"error: expected {len(types) - len(self.captured.parameters)} "
                f"inputs, got {len(args) - len(self.captured.parameters)}"
            )
        for i, (x, ty) in enumerate(zip(args, types, strict=True)):
            want = (tuple(ty.get_shape()), ty.element_type)  # type: ignore[attr-defined]
            got = (tuple(x.shape), DTYPES.get(x.dtype))
            if got != want:
                raise MirageError(
                    f"error: input {i} is {list(x.shape)} {x.dtype}; the program "
                    f"was captured for {ty}"
                )

    def _masks_as_numbers(self, args: list[torch.Tensor]) -> list[torch.Tensor]:
        """A boolean mask as the 0/1 tensor of the dtype the program takes it in."""
        return [
            x.to(torch_dtype(ty.element_type))  # type: ignore[attr-defined]
            if isinstance(x, torch.Tensor) and x.dtype == torch.bool
            else x
            for x, ty in zip(args, self._input_types, strict=False)
        ]

    def _run_compiled(self, args: Sequence[torch.Tensor]) -> Sequence[torch.Tensor]:
        if self._compiled is None:
            self._compiled = compiled_program(self.module)
        outs = self._compiled(*args)
        return [outs] if isinstance(outs, torch.Tensor) else list(outs)

    def _run_interpreted(self, args: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        from mirage_xdsl.semantics.interpreter import run

        arrays = [x.detach().float().numpy() for x in args]
        dtype = args[0].dtype
        return [
            torch.from_numpy(np.require(y, requirements=["C", "W"])).to(dtype)
            for y in run(self.module, arrays)
        ]


_COMPILED: dict[str, Callable[..., Any]] = {}
"""Compiled programs by their text: functions of the same program (a model's
layers, each its own part) share one build. A compiled program allocates its
outputs per call, so sharing it shares no results."""


def compiled_program(module: ModuleOp) -> Callable[..., Any]:
    """``mirage_xdsl.compile(module)``, built once per program text."""
    import mirage_xdsl
    from mirage_xdsl.ir.printing import module_text

    compile_module = getattr(mirage_xdsl, "compile", None)
    if compile_module is None:
        raise MirageError(
            "error: this installation has no GPU runtime (mirage_xdsl.compile)"
        )
    key = module_text(module)
    if key not in _COMPILED:
        _COMPILED[key] = compile_module(module)
    return _COMPILED[key]


def dense(x: Any) -> Any:
    """``x`` as the kernels take it: contiguous and 16-byte aligned, copied
    only where it is not (a view, such as a returned slice, is accepted as
    torch ops accept it)."""
    if isinstance(x, torch.Tensor) and (
        not x.is_contiguous() or x.data_ptr() % ALIGN_BYTES
    ):
        return x.clone(memory_format=torch.contiguous_format)
    return x


def search(module: ModuleOp, **options: Any) -> ModuleOp:
    """``mirage_xdsl.superoptimize`` on a captured module."""
    return searched(module, **options)[0]


CALL_OPTIONS = ("measure", "cache_dir", "log")
"""What :func:`searched` takes beside the search's own options."""


def searched(module: ModuleOp, **options: Any) -> tuple[ModuleOp, list[Report]]:
    """:func:`search`, with the search's reports (one per segment); of
    ``options``, :data:`CALL_OPTIONS` say how to search, the rest what."""
    try:
        from mirage_xdsl.search import make_options, superoptimize_module
    except ImportError:
        raise MirageError(
            "error: this installation has no search (mirage_xdsl.search)"
        ) from None
    if "measure" in options:
        measure = options.pop("measure")
    else:
        from mirage_xdsl.passes.superoptimize import resolve_measure

        measure = resolve_measure("auto")
    cache_dir = options.pop("cache_dir", None)
    log = options.pop("log", sys.stderr)
    out = module.clone()
    reports = superoptimize_module(
        out, make_options(**options), measure, cache_dir, log
    )
    return out, reports


def superoptimize(
    fn: Callable[..., Any] | torch.nn.Module,
    example_inputs: Sequence[torch.Tensor],
    **search_options: Any,
) -> MirageFunction:
    """Capture ``fn``, search for its best µGraph, and return it as a callable.

    ``search_options`` go to :func:`mirage_xdsl.superoptimize` unchanged
    (grid dims, for-loop ranges, budgets...). Without ``measure``, candidates
    are timed on the GPU when one is visible and ranked by the cost model
    otherwise, as the ``superoptimize`` pass does by default. The result takes the same
    tensors as ``fn`` and returns the same structure; its ``reports`` say
    what the search did per segment.
    """
    captured = capture_program(fn, example_inputs)
    return MirageFunction(captured, *searched(captured.module, **search_options))
