// RUN: mirage-opt %s | mirage-opt | filecheck %s

// CHECK-LABEL: func.func @gqa
// CHECK:      %[[A:.*]] = kernel.matmul %{{.*}}, %{{.*}} : tensor<1x2x256x64xf16>, tensor<1x2x64x4096xf16> -> tensor<1x2x256x4096xf16>
// CHECK-NEXT: %[[E:.*]] = kernel.exp %[[A]] : tensor<1x2x256x4096xf16> -> tensor<1x2x256x4096xf16>
// CHECK-NEXT: %[[S:.*]] = kernel.reduce_sum %[[E]] dim 3 : tensor<1x2x256x4096xf16> -> tensor<1x2x256x1xf16>
// CHECK-NEXT: %[[D:.*]] = kernel.div %[[E]], %[[S]]
// CHECK-NEXT: kernel.matmul %[[D]], %{{.*}}

func.func @gqa(%q: tensor<1x2x256x64xf16>, %k: tensor<1x2x64x4096xf16>, %v: tensor<1x2x4096x64xf16>) -> tensor<1x2x256x64xf16> {
  %a = kernel.matmul %q, %k : tensor<1x2x256x64xf16>, tensor<1x2x64x4096xf16> -> tensor<1x2x256x4096xf16>
  %e = kernel.exp %a : tensor<1x2x256x4096xf16> -> tensor<1x2x256x4096xf16>
  %s = kernel.reduce_sum %e dim 3 : tensor<1x2x256x4096xf16> -> tensor<1x2x256x1xf16>
  %d = kernel.div %e, %s : tensor<1x2x256x4096xf16>, tensor<1x2x256x1xf16> -> tensor<1x2x256x4096xf16>
  %o = kernel.matmul %d, %v : tensor<1x2x256x4096xf16>, tensor<1x2x4096x64xf16> -> tensor<1x2x256x64xf16>
  func.return %o : tensor<1x2x256x64xf16>
}
