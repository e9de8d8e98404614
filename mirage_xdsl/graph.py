"""The builder as users see it: the IR builder plus ``superoptimize``.

:mod:`mirage_xdsl.ir.builder` builds programs and is used by every layer
(workloads, the torch capture, the search's own graphs). Finishing a graph
with a search belongs to the layer above the search, so the method that does
it is added here, where ``mirage_xdsl.new_kernel_graph`` takes its class from,
and the builder itself never imports the search.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.ir import builder


class KernelGraph(builder.KernelGraph):
    """A kernel-level program being built; :meth:`superoptimize` finishes it."""

    def superoptimize(self, **options: object) -> ModuleOp:
        """Finish the program and return the best verified µGraph for it.

        Takes the options of :func:`mirage_xdsl.superoptimize` (``budget``,
        ``griddims``, ``measure``, ...); the graph must not be used afterwards.
        """
        # Imported here so that importing mirage_xdsl does not load the search.
        from mirage_xdsl.search import superoptimize

        return superoptimize(self.module(), **options)  # type: ignore[arg-type]


def new_kernel_graph(name: str = "main") -> KernelGraph:
    """An empty kernel-level program named ``name``."""
    return KernelGraph(name)
