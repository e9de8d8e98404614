// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A block op using a value defined after it: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/use_before_def.mlir:10:5: error: 'block.add' uses operand #1 before it is defined{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %s = block.add %t, %e : tensor<8x32xf16>, tensor<8x32xf16> -> tensor<8x32xf16>
    %e = block.exp %t : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %s omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
