"""mirage-xdsl: a multi-level superoptimizer for tensor programs on xDSL."""

from mirage_xdsl.graph import (
    BlockGraph,
    KernelGraph,
    bfloat16,
    float16,
    float32,
    new_kernel_graph,
    new_threadblock_graph,
)

__all__ = [
    "BlockGraph",
    "KernelGraph",
    "bfloat16",
    "float16",
    "float32",
    "new_kernel_graph",
    "new_threadblock_graph",
]
