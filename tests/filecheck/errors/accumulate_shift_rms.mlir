// RUN: not mirage-opt %s 2>&1 | filecheck %s
// Only sums can be shifted: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/accumulate_shift_rms.mlir:12:5: error: 'block.forloop_accum' with a shift must reduce 'none' or 'sum', got 'rms'{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x1xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>) -> tensor<8x1xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<4x8xf16>
    %m = block.reduce_max %t dim 1 : tensor<4x8xf16> -> tensor<4x1xf16>
    %e = block.exp %t : tensor<4x8xf16> -> tensor<4x8xf16>
    %s = block.forloop_accum %e shift %m reduce "rms" : tensor<4x8xf16>, tensor<4x1xf16> -> tensor<4x1xf16>
    block.output %s omap [0, -1, -1] : tensor<4x1xf16>
  }
  func.return %o : tensor<8x1xf16>
}
