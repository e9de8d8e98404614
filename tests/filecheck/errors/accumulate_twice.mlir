// RUN: not mirage-opt %s 2>&1 | filecheck %s
// An accumulator of an accumulated value: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/accumulate_twice.mlir:11:5: error: 'block.forloop_accum' accumulates a value that is already accumulated{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x8xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>) -> tensor<8x8xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<4x8xf16>
    %s = block.forloop_accum %t reduce "none" : tensor<4x8xf16> -> tensor<4x8xf16>
    %r = block.forloop_accum %s reduce "none" : tensor<4x8xf16> -> tensor<4x8xf16>
    block.output %r omap [0, -1, -1] : tensor<4x8xf16>
  }
  func.return %o : tensor<8x8xf16>
}
