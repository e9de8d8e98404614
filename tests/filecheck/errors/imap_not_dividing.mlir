// RUN: not mirage-opt %s 2>&1 | filecheck %s
// An imap whose grid size does not divide the tensor dim: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/imap_not_dividing.mlir:9:5: error: 'block.input': imap splits dim 1 (size 32) across grid dim 0 of size 3, which does not divide it{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [3, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x10xf16>
    block.output %t omap [1, -1, -1] : tensor<8x10xf16>
  }
  func.return %o : tensor<8x32xf16>
}
