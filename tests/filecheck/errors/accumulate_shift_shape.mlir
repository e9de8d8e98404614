// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A shift must hold one value per row of the input: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/accumulate_shift_shape.mlir:11:5: error: 'block.forloop_accum' shift must have shape [4, 1] (one value per row of the input), got [4, 8]{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x8xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>) -> tensor<8x8xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<4x8xf16>
    %e = block.exp %t : tensor<4x8xf16> -> tensor<4x8xf16>
    %s = block.forloop_accum %e shift %t reduce "none" : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xf16>
    block.output %s omap [0, -1, -1] : tensor<4x8xf16>
  }
  func.return %o : tensor<8x8xf16>
}
