// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A customized result whose element type differs from its tile: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/output_dtype.mlir:7:3: error: 'kernel.customized' result #0 element type differs from its output tile{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf32> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf32> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    block.output %t omap [0, -1, -1] : tensor<4x32xf16>
  }
  func.return %o : tensor<8x32xf32>
}
