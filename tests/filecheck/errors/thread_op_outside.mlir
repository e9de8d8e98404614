// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A thread op directly in a block graph: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/thread_op_outside.mlir:10:5: error: 'thread.exp' expects parent op 'block.thread_graph'{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %e = thread.exp %t : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %e omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
