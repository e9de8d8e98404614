// RUN: not mirage-opt %s 2>&1 | filecheck %s
// An op mixing a per-iteration value with an accumulated one: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/loop_post_mix.mlir:11:5: error: 'block.div' mixes a per-iteration value with an accumulated one; per-iteration values must reach it through 'block.forloop_accum'{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x8xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>) -> tensor<8x8xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<4x8xf16>
    %s = block.forloop_accum %t reduce "sum" : tensor<4x8xf16> -> tensor<4x1xf16>
    %d = block.div %t, %s : tensor<4x8xf16>, tensor<4x1xf16> -> tensor<4x8xf16>
    %r = block.forloop_accum %d reduce "none" : tensor<4x8xf16> -> tensor<4x8xf16>
    block.output %r omap [0, -1, -1] : tensor<4x8xf16>
  }
  func.return %o : tensor<8x8xf16>
}
