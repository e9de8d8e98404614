// RUN: mirage-opt %s | mirage-opt | filecheck %s
// kernel.slice takes the elements [start, end) of one dim and kernel.concat
// joins two tensors along one: rotary embedding's rotate_half,
// cat(-x[..., 32:], x[..., :32]). A block.input may read a window of its
// source in place (what default-customize makes of a slice).

// CHECK-LABEL: func.func @rotate_half(
func.func @rotate_half(%x: tensor<1x8x4x64xf16>) -> tensor<1x8x4x64xf16> {
  // CHECK: %[[LO:.*]] = kernel.slice %{{.*}} dim 3 start 0 end 32 : tensor<1x8x4x64xf16> -> tensor<1x8x4x32xf16>
  %lo = kernel.slice %x dim 3 start 0 end 32 : tensor<1x8x4x64xf16> -> tensor<1x8x4x32xf16>
  // CHECK: %[[HI:.*]] = kernel.slice %{{.*}} dim 3 start 32 end 64 : tensor<1x8x4x64xf16> -> tensor<1x8x4x32xf16>
  %hi = kernel.slice %x dim 3 start 32 end 64 : tensor<1x8x4x64xf16> -> tensor<1x8x4x32xf16>
  // CHECK: %[[N:.*]] = kernel.neg %[[HI]]
  %n = kernel.neg %hi : tensor<1x8x4x32xf16> -> tensor<1x8x4x32xf16>
  // CHECK: kernel.concat %[[N]], %[[LO]] dim 3 : tensor<1x8x4x32xf16>, tensor<1x8x4x32xf16> -> tensor<1x8x4x64xf16>
  %r = kernel.concat %n, %lo dim 3 : tensor<1x8x4x32xf16>, tensor<1x8x4x32xf16> -> tensor<1x8x4x64xf16>
  func.return %r : tensor<1x8x4x64xf16>
}

// CHECK-LABEL: func.func @window(
func.func @window(%x: tensor<4x96xf16>) -> tensor<4x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<4x96xf16>) -> tensor<4x32xf16> {
  ^bb0(%a: tensor<4x96xf16>):
    // CHECK: block.input %{{.*}} imap [0, -1, -1] fmap -1 window [1, 32, 64] : tensor<4x96xf16> -> tensor<2x32xf16>
    %t = block.input %a imap [0, -1, -1] fmap -1 window [1, 32, 64] : tensor<4x96xf16> -> tensor<2x32xf16>
    block.output %t omap [0, -1, -1] : tensor<2x32xf16>
  }
  func.return %o : tensor<4x32xf16>
}
