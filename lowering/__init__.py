"""Lowering µGraphs to GPU code, in two backends.

Prerequisites, as passes: ``default_customize`` (a bare kernel op becomes a
``kernel.customized`` of its own) and ``fuse_thread_graphs``.

- Triton (the default): ``triton_legalize`` (the pass that makes a program
  Triton can build), ``triton_tiles`` (padded tile shapes), ``triton_printer``
  (one ``@triton.jit`` kernel per customized op, with ``triton_values``,
  ``triton_buffers``, ``triton_plan``, ``triton_accums`` and
  ``triton_matmul``) and ``triton``
  (the program and the ``-t triton`` target).
- CUDA C: ``lower_to_gpu`` (the pass to the ``gpux`` dialect) builds each kernel
  with ``kernel_lowering``, from its ``schedule``, ``shared_plan``,
  ``tile_copies``, ``block_ops``, ``matmul`` and ``accumulators``, on
  ``gpu_builder`` and ``tiles``; ``cuda_printer`` prints CUDA C, ``nvrtc``
  compiles it, ``cuda`` holds the program and the ``-t cuda`` / ``-t ptx``
  targets; ``emulate`` (with ``emulate_state``, ``emulate_ops``,
  ``emulate_warp``) runs the ``gpux`` IR on the CPU for tests.
- ``program``: the lowered program both backends hand to the runtime.
"""
