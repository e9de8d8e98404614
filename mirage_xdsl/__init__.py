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
    "compile",
]


def __getattr__(name: str):
    # The runtime is imported on first use, so importing mirage_xdsl needs
    # neither torch nor cuda-python.
    if name == "compile":
        from mirage_xdsl.runtime import compile

        return compile
    raise AttributeError(f"module 'mirage_xdsl' has no attribute '{name}'")
