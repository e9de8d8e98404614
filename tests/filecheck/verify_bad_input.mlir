// RUN: not mirage-verify %s %examples/lora.mlir 2>&1 | filecheck %s

// CHECK: verify_bad_input.mlir:[[# @LINE + 3]]:3: error: 'kernel.matmul': matmul contraction dims differ (lhs has 16, rhs has 256)
// CHECK-NOT: Traceback
func.func @lora(%x: tensor<1x256xf16>, %w: tensor<256x4096xf16>, %a: tensor<256x16xf16>, %b: tensor<16x4096xf16>) -> tensor<1x4096xf16> {
  %xa = kernel.matmul %a, %w : tensor<256x16xf16>, tensor<256x4096xf16> -> tensor<256x4096xf16>
  func.return %xa : tensor<256x4096xf16>
}
