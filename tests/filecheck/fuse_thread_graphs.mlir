// RUN: mirage-opt -p fuse-thread-graphs %s | filecheck %s

// exp feeds both the reduction and the chain, so it stays a block op; the
// single-use chain silu -> mul -> div becomes one thread graph.
// CHECK:      %[[E:.*]] = block.exp
// CHECK-NEXT: %[[S:.*]] = block.reduce_sum %[[E]]
// CHECK-NEXT: %[[T:.*]] = block.thread_graph(%[[E]], %{{.*}}, %[[S]])
// CHECK-NEXT: ^{{.*}}(%[[A:.*]]: tensor<4x64xf16>, %[[B:.*]]: tensor<4x1xf16>, %[[C:.*]]: tensor<4x1xf16>):
// CHECK-NEXT:   %[[X:.*]] = thread.silu %[[A]]
// CHECK-NEXT:   %[[Y:.*]] = thread.mul %[[X]], %[[B]]
// CHECK-NEXT:   %[[Z:.*]] = thread.div %[[Y]], %[[C]]
// CHECK-NEXT:   thread.yield %[[Z]]
// CHECK:      block.output %[[T]]

func.func @f(%x: tensor<8x64xf16>, %y: tensor<8x1xf16>) -> tensor<8x64xf16> {
  %o = kernel.customized(%x, %y) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x64xf16>, tensor<8x1xf16>) -> tensor<8x64xf16> {
  ^bb0(%a: tensor<8x64xf16>, %b: tensor<8x1xf16>):
    %ta = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x64xf16> -> tensor<4x64xf16>
    %tb = block.input %b imap [0, -1, -1] fmap -1 : tensor<8x1xf16> -> tensor<4x1xf16>
    %e = block.exp %ta : tensor<4x64xf16> -> tensor<4x64xf16>
    %s = block.reduce_sum %e dim 1 : tensor<4x64xf16> -> tensor<4x1xf16>
    %g = block.silu %e : tensor<4x64xf16> -> tensor<4x64xf16>
    %m = block.mul %g, %tb : tensor<4x64xf16>, tensor<4x1xf16> -> tensor<4x64xf16>
    %d = block.div %m, %s : tensor<4x64xf16>, tensor<4x1xf16> -> tensor<4x64xf16>
    block.output %d omap [0, -1, -1] : tensor<4x64xf16>
  }
  func.return %o : tensor<8x64xf16>
}
