// RUN: mirage-opt %s | mirage-opt | filecheck %s
// Every kernel-level op prints in its custom form and parses back.

// CHECK-LABEL: func.func @all_kernel_ops(
// CHECK-SAME:  %[[X:.*]]: tensor<4x8xf16>, %[[W:.*]]: tensor<8x16xf16>, %[[B:.*]]: tensor<4x1xf16>
func.func @all_kernel_ops(%x: tensor<4x8xf16>, %w: tensor<8x16xf16>, %b: tensor<4x1xf16>) -> tensor<4x1xf16> {
  // CHECK: %[[M:.*]] = kernel.matmul %[[X]], %[[W]] : tensor<4x8xf16>, tensor<8x16xf16> -> tensor<4x16xf16>
  %m = kernel.matmul %x, %w : tensor<4x8xf16>, tensor<8x16xf16> -> tensor<4x16xf16>
  // CHECK: %[[A:.*]] = kernel.add %[[M]], %[[B]] : tensor<4x16xf16>, tensor<4x1xf16> -> tensor<4x16xf16>
  %a = kernel.add %m, %b : tensor<4x16xf16>, tensor<4x1xf16> -> tensor<4x16xf16>
  // CHECK: %[[MU:.*]] = kernel.mul %[[B]], %[[A]] : tensor<4x1xf16>, tensor<4x16xf16> -> tensor<4x16xf16>
  %mu = kernel.mul %b, %a : tensor<4x1xf16>, tensor<4x16xf16> -> tensor<4x16xf16>
  // CHECK: %[[D:.*]] = kernel.div %[[MU]], %[[A]] : tensor<4x16xf16>, tensor<4x16xf16> -> tensor<4x16xf16>
  %d = kernel.div %mu, %a : tensor<4x16xf16>, tensor<4x16xf16> -> tensor<4x16xf16>
  // CHECK: %[[E:.*]] = kernel.exp %[[D]] : tensor<4x16xf16> -> tensor<4x16xf16>
  %e = kernel.exp %d : tensor<4x16xf16> -> tensor<4x16xf16>
  // CHECK: %[[S:.*]] = kernel.silu %[[E]] : tensor<4x16xf16> -> tensor<4x16xf16>
  %s = kernel.silu %e : tensor<4x16xf16> -> tensor<4x16xf16>
  // CHECK: %[[Q:.*]] = kernel.sqrt %[[S]] : tensor<4x16xf16> -> tensor<4x16xf16>
  %q = kernel.sqrt %s : tensor<4x16xf16> -> tensor<4x16xf16>
  // CHECK: %[[SQ:.*]] = kernel.square %[[Q]] : tensor<4x16xf16> -> tensor<4x16xf16>
  %sq = kernel.square %q : tensor<4x16xf16> -> tensor<4x16xf16>
  // CHECK: %[[N:.*]] = kernel.rms_norm %[[SQ]] : tensor<4x16xf16> -> tensor<4x16xf16>
  %n = kernel.rms_norm %sq : tensor<4x16xf16> -> tensor<4x16xf16>
  // CHECK: %[[R:.*]] = kernel.reduce_sum %[[N]] dim 1 : tensor<4x16xf16> -> tensor<4x1xf16>
  %r = kernel.reduce_sum %n dim 1 : tensor<4x16xf16> -> tensor<4x1xf16>
  // CHECK: func.return %[[R]] : tensor<4x1xf16>
  func.return %r : tensor<4x1xf16>
}

// Element types other than f16 are kept.
// CHECK-LABEL: func.func @dtypes
// CHECK: kernel.exp %{{.*}} : tensor<2x3xbf16> -> tensor<2x3xbf16>
// CHECK: kernel.sqrt %{{.*}} : tensor<2x3xf32> -> tensor<2x3xf32>
func.func @dtypes(%a: tensor<2x3xbf16>, %b: tensor<2x3xf32>) -> (tensor<2x3xbf16>, tensor<2x3xf32>) {
  %e = kernel.exp %a : tensor<2x3xbf16> -> tensor<2x3xbf16>
  %s = kernel.sqrt %b : tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %e, %s : tensor<2x3xbf16>, tensor<2x3xf32>
}
