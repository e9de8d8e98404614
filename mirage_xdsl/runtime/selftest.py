"""Small hand-written CUDA programs that exercise the runtime on its own.

They do not depend on the code generator, so a GPU run can tell a runtime
fault from a lowering fault. Between them they cover several launches in
order with an intermediate buffer, a kernel with more than 48 KB of dynamic
shared memory (the ``cuFuncSetAttribute`` path), and all three element types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mirage_xdsl.lowering.program import BufferSpec, GpuProgram, KernelLaunch

ELEMENTWISE = r"""
#include <cuda_fp16.h>

extern "C" __global__ void mul_f16(const __half* a, const __half* b, float* t) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  t[i] = __half2float(a[i]) * __half2float(b[i]);
}

extern "C" __global__ void add_f16(const float* t, const __half* a, __half* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = __float2half(t[i] + __half2float(a[i]));
}
"""

ROW_SUM = r"""
#include <cuda_fp16.h>

// One block per row: the row is staged in dynamic shared memory (cols floats,
// 64 KB for 16384 columns), then reduced by a tree.
extern "C" __global__ void row_sum(const __half* x, float* out) {
  extern __shared__ float row[];
  const int cols = 16384;
  const __half* src = x + (size_t)blockIdx.x * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) row[c] = __half2float(src[c]);
  __syncthreads();
  for (int width = cols / 2; width > 0; width /= 2) {
    for (int c = threadIdx.x; c < width; c += blockDim.x) row[c] += row[c + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = row[0];
}
"""

CONVERT = r"""
#include <cuda_bf16.h>

extern "C" __global__ void scale_bf16(const __nv_bfloat16* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = 2.0f * __bfloat162float(x[i]);
}
"""


def _elementwise(n: int = 4096) -> GpuProgram:
    block = (256, 1, 1)
    grid = (n // 256, 1, 1)
    return GpuProgram(
        function="fma_two_kernels",
        source=ELEMENTWISE,
        buffers=(
            BufferSpec("a", (n // 64, 64), "f16", "input", 0),
            BufferSpec("b", (n // 64, 64), "f16", "input", 1),
            BufferSpec("t", (n // 64, 64), "f32", "intermediate", -1),
            BufferSpec("out", (n // 64, 64), "f16", "output", 0),
        ),
        launches=(
            KernelLaunch("mul_f16", grid, block, 0, ("a", "b", "t")),
            KernelLaunch("add_f16", grid, block, 0, ("t", "a", "out")),
        ),
    )


ROW_SUM_COLS = 16384


def _row_sum(rows: int = 8) -> GpuProgram:
    """64 KB of dynamic shared memory per block: above the default 48 KB."""
    cols = ROW_SUM_COLS
    return GpuProgram(
        function="row_sum_64k_shared",
        source=ROW_SUM,
        buffers=(
            BufferSpec("x", (rows, cols), "f16", "input", 0),
            BufferSpec("sums", (rows,), "f32", "output", 0),
        ),
        launches=(
            KernelLaunch("row_sum", (rows, 1, 1), (256, 1, 1), cols * 4, ("x", "sums")),
        ),
    )


def _convert(n: int = 1024) -> GpuProgram:
    return GpuProgram(
        function="scale_bf16",
        source=CONVERT,
        buffers=(
            BufferSpec("x", (n,), "bf16", "input", 0),
            BufferSpec("y", (n,), "f32", "output", 0),
        ),
        launches=(
            KernelLaunch("scale_bf16", (n // 128, 1, 1), (128, 1, 1), 0, ("x", "y")),
        ),
    )


@dataclass(frozen=True)
class SelfTest:
    program: GpuProgram
    reference: Callable[..., list[np.ndarray]]
    """numpy reference on float32 copies of the inputs."""


SELFTESTS: dict[str, SelfTest] = {
    "two_kernels_with_intermediate": SelfTest(_elementwise(), lambda a, b: [a * b + a]),
    "dynamic_shared_64k": SelfTest(_row_sum(), lambda x: [x.sum(axis=1)]),
    "bf16_to_f32": SelfTest(_convert(), lambda x: [2 * x]),
}
