"""Running lowered programs on an NVIDIA GPU through cuda-python.

``compile(module)`` lowers a µGraph program to CUDA C, compiles it with NVRTC
and returns a :class:`CompiledProgram`, callable on torch CUDA tensors or numpy
arrays. Nothing here imports torch or cuda-python until a program runs.
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
