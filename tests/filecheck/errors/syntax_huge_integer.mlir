// RUN: not mirage-opt %s 2>&1 | filecheck %s
// An integer that does not fit 64 bits: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/syntax_huge_integer.mlir:7:36: error: integer 9223372036854775808 does not fit in 64 bits{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [9223372036854775808, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
