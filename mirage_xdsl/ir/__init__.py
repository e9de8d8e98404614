"""The IR around the dialects: building, parsing, printing and locating µGraphs.

- ``builder``: the Python builder API (``KernelGraph``, ``BlockGraph``).
- ``context``: the xDSL context with every dialect loaded.
- ``diagnostics``: parsing and verification with one-line, located errors.
- ``printing``: module text exactly as ``mirage-opt`` prints it.
- ``rebuild``: a program rebuilt for new input shapes.
- ``dot``: Graphviz pictures (``-t dot``).
- ``union_find``: which dims of which values must agree.
- ``collectives``: a tensor-parallel shard's program cut at its all-reduces.

Everything here builds on :mod:`mirage_xdsl.dialects` and on nothing above it.
"""
