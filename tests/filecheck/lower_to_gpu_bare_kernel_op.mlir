// RUN: mirage-opt -p lower-to-gpu %s | filecheck %s

// A bare kernel op (what a search that kept its input leaves) gets its
// default kernel first, as with 'default-customize' before the lowering.
// CHECK: "gpu.func"() <{function_type = (memref<2x64xf16>, memref<2x64xf16>) -> (), kernel}>
// CHECK: func.func @f(%{{.*}}: memref<2x64xf16>, %{{.*}}: memref<2x64xf16> {mirage.output})
// CHECK: "gpu.launch_func"
// CHECK-NOT: kernel.exp
func.func @f(%x: tensor<2x64xf16>) -> tensor<2x64xf16> {
  %e = kernel.exp %x : tensor<2x64xf16> -> tensor<2x64xf16>
  func.return %e : tensor<2x64xf16>
}
