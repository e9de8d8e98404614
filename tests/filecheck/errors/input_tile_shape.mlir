// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A block.input whose tile type contradicts its maps: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/input_tile_shape.mlir:9:5: error: 'block.input' result shape [8, 32] does not match the expected [4, 32]{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<16x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<16x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [0, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<16x32xf16>
}
