// RUN: not mirage-opt %s 2>&1 | filecheck %s
// An omap naming a tile dim that does not exist: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/omap_out_of_range.mlir:10:5: error: 'block.output': omap maps grid dim 0 to tensor dim 5, out of range for rank 2{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    block.output %t omap [5, -1, -1] : tensor<4x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
