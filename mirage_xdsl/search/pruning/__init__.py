"""Pruning the search: abstract expressions and the subexpression oracle.

- ``abstract_expr``: what a tensor computes, index details dropped.
- ``normal_form``: canonical forms and the direct subexpression test.
- ``axioms``: the same axioms as a quantified z3 theory (proves, never
  refutes).
- ``subexpr_egraph``: equality saturation (egglog) that decides what the
  normal form cannot; the oracle's fallback.
- ``subexpr_z3``: z3 on ground axiom instances, the other deciding
  procedure, measured against the e-graph.
- ``subexpr_oracle``: the cached oracle: normal forms, then the e-graph.
- ``expr_corpus``: query corpora that measure the oracle.
"""
