// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A thread graph yielding types other than its results: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/thread_graph_yield_types.mlir:10:5: error: 'block.thread_graph' yields types that do not match its results{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %g = block.thread_graph(%t) : (tensor<8x32xf16>) -> tensor<8x32xf16> {
    ^bb0(%v: tensor<8x32xf16>):
      %e = thread.exp %v : tensor<8x32xf16> -> tensor<8x32xf16>
      thread.yield %e, %e : tensor<8x32xf16>, tensor<8x32xf16>
    }
    block.output %g omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
