// RUN: mirage-opt --print-op-generic %s | mirage-opt | filecheck %s
// The generic form (properties spelled out) parses back to the same program.

// CHECK:      kernel.customized(%{{.*}}) grid [2, 1, 1] block [64, 1, 1] forloop 2 : (tensor<4x8xf16>) -> tensor<4x1xf16> {
// CHECK:        block.input %{{.*}} imap [0, -1, -1] fmap 1 : tensor<4x8xf16> -> tensor<2x4xf16>
// CHECK-NEXT:   block.thread_graph
// CHECK:          thread.exp
// CHECK-NEXT:     thread.yield
// CHECK:        block.forloop_accum %{{.*}} reduce "sum" : tensor<2x4xf16> -> tensor<2x1xf16>
// CHECK-NEXT:   block.output %{{.*}} omap [0, -1, -1] : tensor<2x1xf16>
func.func @g(%x: tensor<4x8xf16>) -> tensor<4x1xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [64, 1, 1] forloop 2 : (tensor<4x8xf16>) -> tensor<4x1xf16> {
  ^bb0(%a: tensor<4x8xf16>):
    %t = block.input %a imap [0, -1, -1] fmap 1 : tensor<4x8xf16> -> tensor<2x4xf16>
    %e = block.thread_graph(%t) : (tensor<2x4xf16>) -> tensor<2x4xf16> {
    ^bb0(%v: tensor<2x4xf16>):
      %w = thread.exp %v : tensor<2x4xf16> -> tensor<2x4xf16>
      thread.yield %w : tensor<2x4xf16>
    }
    %s = block.forloop_accum %e reduce "sum" : tensor<2x4xf16> -> tensor<2x1xf16>
    block.output %s omap [0, -1, -1] : tensor<2x1xf16>
  }
  func.return %o : tensor<4x1xf16>
}
