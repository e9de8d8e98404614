// RUN: mirage-opt %s | mirage-opt | filecheck %s
// kernel.broadcast stretches a computed tensor along its size-1 dims (and adds
// leading ones): attention's repeat_kv, torch's expand.

// CHECK-LABEL: func.func @repeat_kv(
func.func @repeat_kv(%k: tensor<1x2x1x64x16xf16>, %b: tensor<16xf16>) -> (tensor<1x8x64x16xf16>, tensor<4x16xf16>) {
  // CHECK: kernel.broadcast %{{.*}} : tensor<1x2x1x64x16xf16> -> tensor<1x2x4x64x16xf16>
  %e = kernel.broadcast %k : tensor<1x2x1x64x16xf16> -> tensor<1x2x4x64x16xf16>
  %r = kernel.reshape %e : tensor<1x2x4x64x16xf16> -> tensor<1x8x64x16xf16>
  // CHECK: kernel.broadcast %{{.*}} : tensor<16xf16> -> tensor<4x16xf16>
  %y = kernel.broadcast %b : tensor<16xf16> -> tensor<4x16xf16>
  func.return %r, %y : tensor<1x8x64x16xf16>, tensor<4x16xf16>
}
