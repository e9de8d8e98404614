"""Fuzzing: random valid programs, corrupted IR text and the oracles that check them.

- ``programs``: :func:`random_module` builds a random valid µGraph at all three
  levels; :func:`random_inputs` draws inputs on which its values stay finite.
- ``mutate``: corruptions of valid IR text, for the parser and the verifiers.
- ``oracles``: one seeded case each, shared by the tests and ``tools/fuzz.py``.
"""

from mirage_xdsl.fuzz.programs import random_inputs, random_module

__all__ = ["random_inputs", "random_module"]
