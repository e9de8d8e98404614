// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A block label starting with a digit: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/syntax_block_label.mlir:8:3: error: block label '^5' must start with a letter or '_'{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %o = kernel.customized(%a) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<4x8xf16>) -> tensor<4x8xf16> {
  ^5(%b: tensor<4x8xf16>):
    %t = block.input %b imap [-1, -1, -1] fmap -1 : tensor<4x8xf16> -> tensor<4x8xf16>
    block.output %t omap [-1, -1, -1] : tensor<4x8xf16>
  }
  func.return %o : tensor<4x8xf16>
}
