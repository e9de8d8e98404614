"""``superoptimize``: replace each kernel-level function by its best µGraph.

Searches µGraphs equivalent to every ``func.func`` made of library kernel
ops (``kernel.matmul``, ``kernel.exp``, ...): generates candidates across the
kernel, block and thread levels, prunes by abstract expressions, verifies
with the finite-field verifier and ranks with the H100 cost model. Prints a
summary per function to stderr (and progress on a terminal); results are
cached on disk. Functions that already contain ``kernel.customized`` are left
alone. See ``docs/search.md``.

Options: ``budget`` (seconds), ``max-ops`` (block ops per kernel),
``max-kernels``, ``griddims``/``blockdims``/``imaps``/``omaps`` (e.g.
``"2x16x1;2x16x4"``), ``fmaps``/``franges`` (e.g. ``"1,4,8"``),
``cache-dir`` (``none`` disables the cache; a directory shared by several
machines is safe: entries are replaced atomically and re-verified when
read), ``jobs`` (0: all cores), ``cluster`` (a Dask scheduler's address,
``tcp://host:8786``: the search's tasks run on its workers; see
``docs/distributed.md``),
``no-prune`` (measure what pruning buys), ``no-bound`` (keep the deeper
prefixes that cannot beat the best µGraph found, to measure what the cost
bound buys), ``chain``, ``trials``,
``segment-ops`` (most arithmetic ops searched together: a function with
layout ops, ``kernel.transpose`` and ``kernel.reshape``, or with more ops is
cut into segments searched one by one, the layout ops kept between them; see
``mirage_xdsl/search/partition.py``), ``emit-rewrites`` (a file to write each discovery to as a PDL pattern plus
its µGraph template, for ``apply-mirage-rewrites``), ``measure``: ``auto``
(the default: ``gpu`` when a GPU, torch and cuda-python are there, else
``none``), ``gpu`` (the input and the ``measure-top`` (default 8) cheapest
verified candidates, including other grid and for-loop sizes of the best
structures, are compiled with both backends, Triton autotuned, timed as the
benchmark does, and the fastest wins; times go into the report and the
cache) or ``none`` (the cost model chooses).
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.rewrites.emit import EmitError, emit_pattern, library_module
from mirage_xdsl.search import superoptimize_module
from mirage_xdsl.search.options import SearchOptions, parse_ints, parse_triples


@dataclass(frozen=True)
class Superoptimize(ModulePass):
    name = "superoptimize"

    budget: int | float = 600.0
    max_ops: int = 9
    max_kernels: int = 2
    griddims: str = ""
    blockdims: str = ""
    imaps: str = ""
    omaps: str = ""
    fmaps: str = ""
    franges: str = ""
    cache_dir: str = ""
    jobs: int = 0
    cluster: str = ""
    no_prune: bool = False
    no_bound: bool = False
    chain: str = "partial"
    trials: int = 0
    emit_rewrites: str = ""
    measure: str = "auto"
    measure_top: int = 8
    segment_ops: int = 9

    def options(self) -> SearchOptions:
        try:
            if self.chain not in ("partial", "all"):
                raise ValueError(
                    f"option 'chain': expected 'partial' or 'all', got '{self.chain}'"
                )
            for what, value in (
                ("budget", self.budget),
                ("max-ops", self.max_ops),
                ("max-kernels", self.max_kernels),
                ("measure-top", self.measure_top),
                ("segment-ops", self.segment_ops),
            ):
                if value <= 0:
                    raise ValueError(f"option '{what}' must be positive, got {value}")
            if self.trials < 0:
                raise ValueError(f"option 'trials' must be >= 0, got {self.trials}")
            if self.cluster != self.cluster.strip() or " " in self.cluster:
                raise ValueError(
                    f"option 'cluster': expected a scheduler address such as "
                    f"tcp://host:8786, got '{self.cluster}'"
                )
            return SearchOptions(
                budget=self.budget,
                max_ops=self.max_ops,
                max_kernels=self.max_kernels,
                griddims=parse_triples(self.griddims, "griddims"),
                blockdims=parse_triples(self.blockdims, "blockdims"),
                imaps=parse_triples(self.imaps, "imaps"),
                omaps=parse_triples(self.omaps, "omaps"),
                fmaps=parse_ints(self.fmaps, "fmaps"),
                franges=parse_ints(self.franges, "franges"),
                jobs=self.jobs,
                cluster=self.cluster,
                prune=not self.no_prune,
                bound=not self.no_bound,
                chain=self.chain,
                trials=self.trials,
                measure_top=self.measure_top,
                segment_ops=self.segment_ops,
            )
        except ValueError as e:
            raise MirageError(f"superoptimize: error: {e}") from None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        sources = {
            f.sym_name.data: f.clone() for f in op.ops if isinstance(f, func.FuncOp)
        }
        superoptimize_module(
            op,
            self.options(),
            measure=resolve_measure(self.measure),
            cache_dir=self.cache_dir or None,
        )
        if self.emit_rewrites:
            write_rewrites(self.emit_rewrites, sources, op)


MEASURES = ("auto", "gpu", "none")


def resolve_measure(mode: str):
    """The search's ``measure`` for option ``measure`` (None: the cost model)."""
    if mode not in MEASURES:
        raise MirageError(
            f"superoptimize: error: option 'measure': expected one of "
            f"{list(MEASURES)}, got '{mode}'"
        )
    if mode == "none":
        return None
    # the runtime is only needed, and only imported, when a GPU may measure
    from mirage_xdsl.runtime.measure import GpuMeasure, gpu_available

    if gpu_available():
        return GpuMeasure()
    if mode == "gpu":
        raise MirageError(
            "superoptimize: error: measure=gpu needs a GPU visible to torch and "
            "cuda-python; use measure=none to rank by the cost model"
        )
    return None


def write_rewrites(
    path: str, sources: dict[str, func.FuncOp], module: ModuleOp
) -> None:
    """Write each rewritten single-output function as a PDL pattern + template."""
    entries = []
    for fn in module.ops:
        if not isinstance(fn, func.FuncOp) or fn.sym_name.data not in sources:
            continue
        source = sources[fn.sym_name.data]
        if any(o.name == "kernel.customized" for o in source.walk()):
            continue
        try:
            emit_pattern(source, fn.sym_name.data)
        except EmitError as e:
            print(
                f"superoptimize: @{fn.sym_name.data}: no rewrite emitted: {e}",
                file=sys.stderr,
            )
            continue
        entries.append((source, fn, fn.sym_name.data))
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".rewrites-")
    with os.fdopen(fd, "w") as f:
        f.write(module_text(library_module(entries)))
    os.replace(tmp, path)
