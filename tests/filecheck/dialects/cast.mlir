// RUN: mirage-opt %s | mirage-opt | filecheck %s
// kernel.cast stores the same values in another float element type; a
// customized kernel's result may hold another element type than its tile
// (blocks compute in fp32 and the store converts).

// CHECK-LABEL: func.func @norm_in_fp32(
func.func @norm_in_fp32(%x: tensor<4x96xbf16>) -> tensor<4x96xbf16> {
  // CHECK: kernel.cast %{{.*}} : tensor<4x96xbf16> -> tensor<4x96xf32>
  %a = kernel.cast %x : tensor<4x96xbf16> -> tensor<4x96xf32>
  %n = kernel.rms_norm %a : tensor<4x96xf32> -> tensor<4x96xf32>
  // CHECK: kernel.cast %{{.*}} : tensor<4x96xf32> -> tensor<4x96xbf16>
  %b = kernel.cast %n : tensor<4x96xf32> -> tensor<4x96xbf16>
  func.return %b : tensor<4x96xbf16>
}

// CHECK-LABEL: func.func @storing_kernel(
func.func @storing_kernel(%x: tensor<8x32xf16>) -> tensor<8x32xf32> {
  // CHECK: kernel.customized(%{{.*}}) {{.*}} : (tensor<8x32xf16>) -> tensor<8x32xf32>
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf32> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    block.output %t omap [0, -1, -1] : tensor<4x32xf16>
  }
  func.return %o : tensor<8x32xf32>
}
