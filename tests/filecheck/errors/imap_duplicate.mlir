// RUN: not mirage-opt %s 2>&1 | filecheck %s
// An imap splitting one tensor dim across two grid dims: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/imap_duplicate.mlir:9:5: error: 'block.input': imap maps two grid dims to tensor dim 0{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [2, 2, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, 0, -1] fmap -1 : tensor<8x32xf16> -> tensor<2x32xf16>
    block.output %t omap [0, 1, -1] : tensor<2x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
