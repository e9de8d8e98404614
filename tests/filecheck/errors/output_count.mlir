// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A customized op with more results than output savers: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/output_count.mlir:7:3: error: 'kernel.customized' has 2 results but its block graph has 1 'block.output' ops{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o, %p = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> (tensor<8x32xf16>, tensor<8x32xf16>) {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
