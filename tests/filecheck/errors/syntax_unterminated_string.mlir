// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A string literal that is never closed: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/syntax_unterminated_string.mlir:10:40: error: string literal is never closed{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<8x8xf16>
    %s = block.forloop_accum %t reduce "none : tensor<8x8xf16> -> tensor<8x8xf16>
    block.output %s omap [-1, -1, -1] : tensor<8x8xf16>
  }
  func.return %o : tensor<8x32xf16>
}
