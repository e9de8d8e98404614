// RUN: mirage-opt %s | mirage-opt | filecheck %s
// RUN: mirage-opt -p 'superoptimize{cache-dir=none jobs=1}' %s 2>/dev/null | filecheck %s --check-prefix=SEARCH
// A tensor-parallel shard of a gated MLP: the column-parallel gate and up
// projections, the row-parallel down projection, one sum over the 2 shards.
// The search keeps the sum as it is, between the kernels it finds and the
// function's end.

// CHECK-LABEL: func.func @mlp_shard(
func.func @mlp_shard(%x: tensor<1x64xf16>, %a: tensor<64x32xf16>, %b: tensor<64x32xf16>, %c: tensor<32x64xf16>) -> tensor<1x64xf16> {
  %g = kernel.matmul %x, %a : tensor<1x64xf16>, tensor<64x32xf16> -> tensor<1x32xf16>
  %u = kernel.matmul %x, %b : tensor<1x64xf16>, tensor<64x32xf16> -> tensor<1x32xf16>
  %s = kernel.silu %g : tensor<1x32xf16> -> tensor<1x32xf16>
  %h = kernel.mul %s, %u : tensor<1x32xf16>, tensor<1x32xf16> -> tensor<1x32xf16>
  %p = kernel.matmul %h, %c : tensor<1x32xf16>, tensor<32x64xf16> -> tensor<1x64xf16>
  // CHECK: kernel.all_reduce %{{.*}} shards 2 : tensor<1x64xf16> -> tensor<1x64xf16>
  // SEARCH: kernel.customized
  // SEARCH: kernel.all_reduce %{{.*}} shards 2 : tensor<1x64xf16> -> tensor<1x64xf16>
  // SEARCH-NEXT: func.return
  %y = kernel.all_reduce %p shards 2 : tensor<1x64xf16> -> tensor<1x64xf16>
  func.return %y : tensor<1x64xf16>
}
