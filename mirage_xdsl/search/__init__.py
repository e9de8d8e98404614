"""The superoptimizer: generate, prune, verify and rank µGraphs.

``superoptimize(module, **options)`` rewrites every kernel-level function of
a module into the best verified µGraph found; see ``docs/search.md``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import fields
from typing import Any, TextIO

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.superoptimizer import (
    Measure,
    Outcome,
    Report,
    superoptimize_function,
)

SEARCHABLE_PREFIX = "kernel."


def searchable(fn: func.FuncOp) -> bool:
    """A function of library kernel ops only (nothing customized yet)."""
    ops = [op for op in fn.body.block.ops if not isinstance(op, func.ReturnOp)]
    return bool(ops) and all(
        op.name.startswith(SEARCHABLE_PREFIX) and op.name != "kernel.customized"
        for op in ops
    )


def make_options(**options: Any) -> SearchOptions:
    names = {f.name for f in fields(SearchOptions)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise TypeError(f"unknown superoptimize option(s): {', '.join(unknown)}")
    return SearchOptions(**options)


def superoptimize_module(
    module: ModuleOp,
    options: SearchOptions,
    measure: Measure | None = None,
    cache_dir: str | None = None,
    log: TextIO | None = sys.stderr,
) -> list[Report]:
    """Rewrite each searchable function of ``module`` in place."""
    reports = []
    for fn in [op for op in module.ops if isinstance(op, func.FuncOp)]:
        if not searchable(fn):
            continue
        outcome: Outcome = superoptimize_function(fn, options, measure, cache_dir)
        new = outcome.function
        new.sym_name = fn.sym_name
        module.body.block.insert_op_before(new, fn)
        fn.detach()
        fn.erase()
        if log is not None:
            print(outcome.report.summary(), file=log)
        reports.append(outcome.report)
    return reports


def superoptimize(
    module: ModuleOp,
    *,
    measure: Callable[[ModuleOp], float] | None = None,
    cache_dir: str | None = None,
    log: TextIO | None = sys.stderr,
    **options: Any,
) -> ModuleOp:
    """A copy of ``module`` with every kernel-level function superoptimized.

    ``options`` are the fields of :class:`SearchOptions` (``budget``,
    ``max_ops``, ``griddims``, ...); ``measure`` times a candidate module on
    the device and then decides the ranking instead of the cost model.
    """
    out = module.clone()
    superoptimize_module(out, make_options(**options), measure, cache_dir, log)
    return out


__all__ = ["Report", "SearchOptions", "superoptimize", "superoptimize_module"]
