// RUN: not mirage-opt %s 2>&1 | filecheck %s
// Customized region arguments that differ from its inputs: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/region_args.mlir:7:3: error: 'kernel.customized' region arguments must match the input types{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x16xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x16xf16> {
  ^bb0(%a: tensor<8x16xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x16xf16> -> tensor<8x16xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x16xf16>
  }
  func.return %o : tensor<8x16xf16>
}
