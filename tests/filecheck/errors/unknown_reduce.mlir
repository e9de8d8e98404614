// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A forloop_accum with an unknown reduction kind: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/unknown_reduce.mlir:10:5: error: 'block.forloop_accum' reduce must be one of ['none', 'sum', 'mean', 'rms'], got 'max'{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x1xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>) -> tensor<8x1xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<8x8xf16>
    %s = block.forloop_accum %t reduce "max" : tensor<8x8xf16> -> tensor<8x1xf16>
    block.output %s omap [-1, -1, -1] : tensor<8x1xf16>
  }
  func.return %o : tensor<8x1xf16>
}
