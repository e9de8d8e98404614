"""The µGraph dialects and what their verifiers check.

- ``kernel``, ``block``, ``thread``: the three levels of a µGraph, one module
  each, their concrete ops deriving from the shared bases in ``tensor_ops``.
- ``gpux``: the GPU-level dialect the CUDA C lowering targets.
- ``shapes``: broadcasting, matmul shapes and partition maps, the rules every
  level agrees on.
- ``block_structure``: the phases, outputs and shared memory of a block graph,
  checked by ``kernel.customized``'s verifier and read by the interpreter and
  the lowering.

This is the lowest layer of the package: nothing here imports the rest.
"""
