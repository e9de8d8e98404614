// RUN: not mirage-opt -p lower-to-gpu %s 2>&1 | filecheck %s

// CHECK: error: lower-to-gpu: 'kernel.exp' has no block-level definition; run 'default-customize' first
// CHECK-NOT: Traceback
func.func @f(%x: tensor<2x64xf16>) -> tensor<2x64xf16> {
  %e = kernel.exp %x : tensor<2x64xf16> -> tensor<2x64xf16>
  func.return %e : tensor<2x64xf16>
}
