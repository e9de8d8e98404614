"""Pruning the search: abstract expressions and the subexpression oracle.

- ``abstract_expr``: what a tensor computes, index details dropped.
- ``normal_form``: canonical forms and the direct subexpression test.
- ``axioms``: the same axioms as a z3 theory, for what the normal form cannot
  decide.
- ``subexpr_oracle``: the cached oracle that asks the two in turn.
- ``expr_corpus``: query corpora that measure the oracle.
"""
