// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A for-loop range below one: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/forloop_zero.mlir:7:3: error: 'kernel.customized' forloop range must be >= 1{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 0 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
