// RUN: not mirage-opt %s 2>&1 | filecheck %s
// Concat operands that differ outside the concat dim: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/concat_shape.mlir:12:5: error: 'block.concat': concat operands differ in dimension 0 (4 vs 1){{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x64xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x64xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    %u = block.input %a imap [0, 1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    %s = block.reduce_sum %u dim 0 : tensor<4x32xf16> -> tensor<1x32xf16>
    %c = block.concat %t, %s dim 1 : tensor<4x32xf16>, tensor<1x32xf16> -> tensor<4x64xf16>
    block.output %c omap [0, -1, -1] : tensor<4x64xf16>
  }
  func.return %o : tensor<8x64xf16>
}
