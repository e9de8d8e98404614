// RUN: not mirage-opt %s 2>&1 | filecheck %s
// An omap that leaves a grid dim of size > 1 unmapped: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/omap_unmapped.mlir:10:5: error: 'block.output': omap leaves grid dim 0 (size 2) unmapped, so 2 blocks would write the same output tile{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<4x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<4x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<4x32xf16>
  }
  func.return %o : tensor<4x32xf16>
}
