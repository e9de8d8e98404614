"""What a µGraph computes: the interpreter and the value domains it computes in.

- ``interpreter``: one walker of every level, with the GPU's partition
  semantics, over a value domain.
- ``domain``: the float domain (the finite-field one is the verifier's).
- ``inputs``: input shapes and seeded random inputs.
- ``sharding``: tensor-parallel programs, their placements, and all their
  shards run in one process.
"""
