// RUN: not mirage-opt -t cuda %s 2>&1 | filecheck %s

// CHECK: cuda_bf16.mlir:7:3: error: 'kernel.exp' makes a bf16 tensor, which the CUDA C backend does not support; use the Triton backend (-t triton, and the runtime's default)
// CHECK-NOT: Traceback
func.func @f(%x: tensor<16x16xbf16>) -> tensor<16x16xbf16> {
  // the exp below is line 7
  %e = kernel.exp %x : tensor<16x16xbf16> -> tensor<16x16xbf16>
  func.return %e : tensor<16x16xbf16>
}
