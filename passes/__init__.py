"""Module passes from µGraphs to µGraphs, one module each.

- ``superoptimize``: the search, with measured selection when a GPU is visible.
- ``apply_mirage_rewrites``: the rewrite library, applied to larger programs.
- ``verify_equivalent``: a check that the module still computes what a
  reference program computes.

The passes that prepare and perform lowering live in :mod:`mirage_xdsl.lowering`;
the names ``-p`` accepts for all of them are in :mod:`mirage_xdsl.registry`.
"""
