"""Search results as reusable rewrites: PDL patterns and the rewrite library.

A discovery of the superoptimizer is a pair (kernel-level subgraph, µGraph).
``emit`` turns it into a ``pdl.pattern`` that matches the subgraph and names
its µGraph template; ``library`` loads a module of such patterns, re-verifies
each one, and ``apply`` instantiates templates where patterns match, for new
shapes too, checking every instantiation before keeping it.
"""
