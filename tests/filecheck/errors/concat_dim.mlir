// RUN: not mirage-opt %s 2>&1 | filecheck %s
// Concat along a dim the operands do not have: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/concat_dim.mlir:10:5: error: 'block.concat': concat dim 2 out of range for rank 2{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x64xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x64xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    %c = block.concat %t, %t dim 2 : tensor<4x32xf16>, tensor<4x32xf16> -> tensor<4x64xf16>
    block.output %c omap [0, -1, -1] : tensor<4x64xf16>
  }
  func.return %o : tensor<8x64xf16>
}
