"""Equivalence of two µGraphs by finite-field fingerprints, and its soundness corpus.

- ``equivalence``: the verdict (:func:`equivalent`) and its false-positive bound.
- ``finite_field``: the fingerprint domain; ``residue_arith`` and
  ``finite_field_torch`` its array steps in numpy and torch, ``keyed_hash``
  its keyed hashes and row digests, ``buffer_pool`` its reused large arrays.
- ``fingerprint_slice``: which residues a program needs.
- ``fingerprint_bound``: the degree bounds the verdict's bound is built from.
- ``sharded``: a tensor-parallel program against the unsharded one.
- ``mutants``: edits that change what a program computes, all of which the
  verifier must reject.
"""

from mirage_xdsl.verify.equivalence import Verdict, equivalent, float_check

__all__ = ["Verdict", "equivalent", "float_check"]
