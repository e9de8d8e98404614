"""Running lowered programs on an NVIDIA GPU.

``compile(module)`` lowers a µGraph program with the Triton backend (autotuned
when a GPU is visible) or to CUDA C through NVRTC, and returns a
:class:`CompiledProgram`, callable on torch CUDA tensors or numpy arrays.

- ``api``: ``compile`` and ``lower``, the choice of backend.
- ``compiled``: the compiled program and its cubins; ``executable``,
  ``arguments`` and ``driver``: loading and launching through cuda-python.
- ``triton_backend``, ``triton_compile``, ``autotune``: Triton kernels to cubins,
  with the settings measured on the device.
- ``compile`` and ``cache``: NVRTC and the on-disk cubin cache.
- ``distributed`` (imports torch): a tensor-parallel program, one process per
  GPU, NCCL between its stages.
- ``timer`` and ``measure``: timing as the benchmark does (CUDA graphs, L2
  flushed, the flush subtracted, the median), for the search's measured
  selection, one timing per GPU at a time (``device_lock``), checked, and
  aware of other processes' work (``gpu_activity``); ``check`` and
  ``selftest``: correctness checks on the device.

Nothing here imports torch or cuda-python until a program runs.
"""

from mirage_xdsl.runtime.api import compile, lower
from mirage_xdsl.runtime.compile import CompileError, compile_cuda
from mirage_xdsl.runtime.compiled import CompiledProgram
from mirage_xdsl.runtime.driver import GpuError, GpuUnavailable

__all__ = [
    "CompileError",
    "CompiledProgram",
    "GpuError",
    "GpuUnavailable",
    "compile",
    "compile_cuda",
    "lower",
]
