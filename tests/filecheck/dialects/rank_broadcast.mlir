// RUN: mirage-opt %s | mirage-opt | filecheck %s
// Kernel-level operands broadcast by numpy's rules: a lower-rank operand lines
// up with the trailing dims (a norm weight [h] times [b, t, h]), and a matmul's
// batch dims broadcast (a batched input times one 2-d weight). Inside a block
// graph a block.input lifts the lower-rank tensor to a tile of equal rank.

// CHECK-LABEL: func.func @norm_weight_linear(
func.func @norm_weight_linear(%x: tensor<2x16x64xf16>, %w: tensor<64xf16>, %p: tensor<64x32xf16>) -> tensor<2x16x32xf16> {
  // CHECK: kernel.mul %{{.*}}, %{{.*}} : tensor<2x16x64xf16>, tensor<64xf16> -> tensor<2x16x64xf16>
  %s = kernel.mul %x, %w : tensor<2x16x64xf16>, tensor<64xf16> -> tensor<2x16x64xf16>
  // CHECK: kernel.add %{{.*}}, %{{.*}} : tensor<64xf16>, tensor<2x16x64xf16> -> tensor<2x16x64xf16>
  %a = kernel.add %w, %s : tensor<64xf16>, tensor<2x16x64xf16> -> tensor<2x16x64xf16>
  // CHECK: kernel.matmul %{{.*}}, %{{.*}} : tensor<2x16x64xf16>, tensor<64x32xf16> -> tensor<2x16x32xf16>
  %m = kernel.matmul %a, %p : tensor<2x16x64xf16>, tensor<64x32xf16> -> tensor<2x16x32xf16>
  func.return %m : tensor<2x16x32xf16>
}

// CHECK-LABEL: func.func @lifted_tiles(
func.func @lifted_tiles(%x: tensor<2x16x64xf16>, %w: tensor<64xf16>, %p: tensor<64x32xf16>) -> tensor<2x16x32xf16> {
  %o = kernel.customized(%x, %w, %p) grid [2, 2, 1] block [128, 1, 1] forloop 4 : (tensor<2x16x64xf16>, tensor<64xf16>, tensor<64x32xf16>) -> tensor<2x16x32xf16> {
  ^bb0(%a: tensor<2x16x64xf16>, %b: tensor<64xf16>, %c: tensor<64x32xf16>):
    %ta = block.input %a imap [0, -1, -1] fmap 2 : tensor<2x16x64xf16> -> tensor<1x16x16xf16>
    // CHECK: block.input %{{.*}} imap [-1, -1, -1] fmap 2 : tensor<64xf16> -> tensor<1x1x16xf16>
    %tb = block.input %b imap [-1, -1, -1] fmap 2 : tensor<64xf16> -> tensor<1x1x16xf16>
    // CHECK: block.input %{{.*}} imap [-1, 2, -1] fmap 1 : tensor<64x32xf16> -> tensor<1x16x16xf16>
    %tc = block.input %c imap [-1, 2, -1] fmap 1 : tensor<64x32xf16> -> tensor<1x16x16xf16>
    %m = block.mul %ta, %tb : tensor<1x16x16xf16>, tensor<1x1x16xf16> -> tensor<1x16x16xf16>
    %p2 = block.matmul %m, %tc : tensor<1x16x16xf16>, tensor<1x16x16xf16> -> tensor<1x16x16xf16>
    %acc = block.forloop_accum %p2 reduce "none" : tensor<1x16x16xf16> -> tensor<1x16x16xf16>
    block.output %acc omap [0, 2, -1] : tensor<1x16x16xf16>
  }
  func.return %o : tensor<2x16x32xf16>
}
