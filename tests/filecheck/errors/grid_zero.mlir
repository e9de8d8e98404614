// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A grid with an empty dim: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/grid_zero.mlir:7:3: error: 'kernel.customized' grid must be three positive sizes, got [0, 1, 1]{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [0, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
