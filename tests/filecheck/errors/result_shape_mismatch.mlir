// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A customized result type that differs from what its output saver stitches: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/result_shape_mismatch.mlir:7:3: error: 'kernel.customized' result #0 has shape [8, 32] but its 'block.output' stitches [4, 64]{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    block.output %t omap [1, -1, -1] : tensor<4x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
