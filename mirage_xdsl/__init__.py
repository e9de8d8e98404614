"""mirage-xdsl: a multi-level superoptimizer for tensor programs on xDSL."""

from mirage_xdsl.graph import KernelGraph, new_kernel_graph
from mirage_xdsl.ir.builder import (
    BlockGraph,
    bfloat16,
    float16,
    float32,
    new_threadblock_graph,
)


def superoptimize(module, **options):  # type: ignore[no-untyped-def]
    """The best verified µGraph for every kernel-level function of ``module``.

    A copy of the module is returned; see :func:`mirage_xdsl.search.superoptimize`
    for the options.
    """
    from mirage_xdsl.search import superoptimize as search

    return search(module, **options)


__all__ = [
    "BlockGraph",
    "KernelGraph",
    "bfloat16",
    "float16",
    "float32",
    "new_kernel_graph",
    "new_threadblock_graph",
    "compile",
    "superoptimize",
]


def __getattr__(name: str):
    # The runtime is imported on first use, so importing mirage_xdsl needs
    # neither torch nor cuda-python.
    if name == "compile":
        from mirage_xdsl.runtime import compile

        return compile
    raise AttributeError(f"module 'mirage_xdsl' has no attribute '{name}'")
