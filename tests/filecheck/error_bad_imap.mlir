// RUN: not mirage-opt %s 2>&1 | filecheck %s

// CHECK: error_bad_imap.mlir:[[# @LINE + 5]]:5: error: 'block.input': imap splits dim 1 (size 64) across grid dim 0 of size 3, which does not divide it
// CHECK-NOT: Traceback
func.func @f(%x: tensor<2x64xf16>) -> tensor<2x64xf16> {
  %o = kernel.customized(%x) grid [3, 1, 1] block [128, 1, 1] forloop 1 : (tensor<2x64xf16>) -> tensor<2x64xf16> {
  ^bb0(%a: tensor<2x64xf16>):
    %t = block.input %a imap [1, -1, -1] fmap -1 : tensor<2x64xf16> -> tensor<2x21xf16>
    block.output %t omap [1, -1, -1] : tensor<2x21xf16>
  }
  func.return %o : tensor<2x64xf16>
}
