// RUN: not mirage-opt %s 2>&1 | filecheck %s
// An fmap whose for-loop range does not divide the tile: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/fmap_not_dividing.mlir:9:5: error: 'block.input': fmap splits dim 1 (size 32 per block) across 5 for-loop iterations, which does not divide it{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 5 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<4x6xf16>
    %s = block.forloop_accum %t reduce "none" : tensor<4x6xf16> -> tensor<4x6xf16>
    block.output %s omap [0, -1, -1] : tensor<4x6xf16>
  }
  func.return %o : tensor<8x32xf16>
}
