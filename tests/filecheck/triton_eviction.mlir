// RUN: mirage-opt -t triton %s | filecheck %s
// RUN: mirage-opt -t triton %examples/gqa_flashdecoding.mlir | filecheck %s --check-prefix=LOOP

// A kernel that loads its whole tiles once, with no for-loop and no matmul
// (here add + RMSNorm over one row), asks L2 to keep them (evict_last).
// CHECK:      def add_rmsnorm_k0(in0, in1, in2, out0):
// CHECK:      tl.load(in0 + {{.*}}, eviction_policy='evict_last')
// CHECK-NEXT: tl.load(in1 + {{.*}}, eviction_policy='evict_last')
// CHECK-NEXT: tl.load(in2 + {{.*}}, eviction_policy='evict_last')

// With a for-loop, a streamed program input goes first (evict_first); the
// queries, which several blocks read, get no hint, nor does the combine
// kernel's read of the parts (it has a for-loop too, and loads ahead).
// LOOP:      def gqa_k0(
// LOOP:      x1 = tl.load(in0 + {{.*}}:])  # in0 imap
// LOOP:      tl.load(in1 + {{.*}}, eviction_policy='evict_first')
// LOOP:      def gqa_k1(
// LOOP:      a{{[0-9]+}} = tl.load(in0 + {{.*}}:])  # in0 imap

builtin.module {
  func.func @add_rmsnorm(%0: tensor<1x2048xf16>, %1: tensor<1x2048xf16>, %2: tensor<1x2048xf16>) -> tensor<1x2048xf16> {
    %3 = kernel.customized(%0, %1, %2) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<1x2048xf16>, tensor<1x2048xf16>, tensor<1x2048xf16>) -> tensor<1x2048xf16> {
    ^bb0(%4: tensor<1x2048xf16>, %5: tensor<1x2048xf16>, %6: tensor<1x2048xf16>):
      %7 = block.input %4 imap [-1, -1, -1] fmap -1 : tensor<1x2048xf16> -> tensor<1x2048xf16>
      %8 = block.input %5 imap [-1, -1, -1] fmap -1 : tensor<1x2048xf16> -> tensor<1x2048xf16>
      %9 = block.input %6 imap [-1, -1, -1] fmap -1 : tensor<1x2048xf16> -> tensor<1x2048xf16>
      %10 = block.add %7, %8 : tensor<1x2048xf16>, tensor<1x2048xf16> -> tensor<1x2048xf16>
      %11 = block.mul %10, %10 : tensor<1x2048xf16>, tensor<1x2048xf16> -> tensor<1x2048xf16>
      %12 = block.reduce_sum %11 dim 1 : tensor<1x2048xf16> -> tensor<1x1xf16>
      %13 = block.div %10, %12 : tensor<1x2048xf16>, tensor<1x1xf16> -> tensor<1x2048xf16>
      %14 = block.mul %13, %9 : tensor<1x2048xf16>, tensor<1x2048xf16> -> tensor<1x2048xf16>
      block.output %14 omap [-1, -1, -1] : tensor<1x2048xf16>
    }
    func.return %3 : tensor<1x2048xf16>
  }
}
