// RUN: mirage-opt -p default-customize,lower-to-gpu %s | filecheck %s

// A reshape is no kernel: two ops, two kernels. The returned reshape's
// buffer is the output; the exp kernel writes it through a view with its own
// shape, and the reduction reads it there, so nothing is allocated.
// CHECK:      "gpu.func"() <{function_type = (memref<8x64xf16>, memref<8x64xf16>) -> (), kernel}>
// CHECK:      "gpu.func"() <{function_type = (memref<2x4x64xf16>, memref<2x4x1xf16>) -> (), kernel}>
// CHECK-NOT:  "gpu.func"
// CHECK:      func.func @views(%[[X:.*]]: memref<8x64xf16>, %[[R:.*]]: memref<2x4x64xf16> {mirage.output}, %[[S:.*]]: memref<2x4x1xf16> {mirage.output})
// CHECK-NOT:  memref.alloc
// CHECK:      %[[V:.*]] = memref.reinterpret_cast %[[R]] to offset: [0], sizes: [8, 64], strides: [64, 1] : memref<2x4x64xf16> to memref<8x64xf16>
// CHECK:      "gpu.launch_func"({{.*}}, %[[X]], %[[V]]) <{kernel = @kernels::@views_k0
// CHECK:      "gpu.launch_func"({{.*}}, %[[R]], %[[S]]) <{kernel = @kernels::@views_k1
// CHECK-NOT:  "gpu.launch_func"

func.func @views(%x: tensor<8x64xf16>) -> (tensor<2x4x64xf16>, tensor<2x4x1xf16>) {
  %e = kernel.exp %x : tensor<8x64xf16> -> tensor<8x64xf16>
  %r = kernel.reshape %e : tensor<8x64xf16> -> tensor<2x4x64xf16>
  %s = kernel.reduce_sum %r dim 2 : tensor<2x4x64xf16> -> tensor<2x4x1xf16>
  func.return %r, %s : tensor<2x4x64xf16>, tensor<2x4x1xf16>
}
