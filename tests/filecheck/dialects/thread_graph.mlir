// RUN: mirage-opt %s | mirage-opt | filecheck %s
// A thread graph inside a block graph: region arguments stand for the operands,
// every thread op appears, and thread.yield returns two results.

// CHECK-LABEL: func.func @fused
// CHECK:      kernel.customized(%{{.*}}) grid [4, 1, 1] block [128, 1, 1] forloop 1
// CHECK:        %[[T:.*]] = block.input %{{.*}} imap [0, -1, -1] fmap -1 : tensor<16x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:   %[[S:.*]] = block.reduce_sum %[[T]] dim 1 : tensor<4x64xf16> -> tensor<4x1xf16>
// CHECK-NEXT:   %[[G:[^ ,]+]], %[[H:[^ ,]+]] = block.thread_graph(%[[T]], %[[S]]) : (tensor<4x64xf16>, tensor<4x1xf16>) -> (tensor<4x64xf16>, tensor<4x1xf16>) {
// CHECK-NEXT:   ^{{.*}}(%[[X:.*]]: tensor<4x64xf16>, %[[Y:.*]]: tensor<4x1xf16>):
// CHECK-NEXT:     %[[A:.*]] = thread.add %[[X]], %[[Y]] : tensor<4x64xf16>, tensor<4x1xf16> -> tensor<4x64xf16>
// CHECK-NEXT:     %[[M:.*]] = thread.mul %[[A]], %[[X]] : tensor<4x64xf16>, tensor<4x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:     %[[D:.*]] = thread.div %[[M]], %[[Y]] : tensor<4x64xf16>, tensor<4x1xf16> -> tensor<4x64xf16>
// CHECK-NEXT:     %[[E:.*]] = thread.exp %[[D]] : tensor<4x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:     %[[L:.*]] = thread.silu %[[E]] : tensor<4x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:     %[[Q:.*]] = thread.sqrt %[[L]] : tensor<4x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:     %[[R:.*]] = thread.square %[[Y]] : tensor<4x1xf16> -> tensor<4x1xf16>
// CHECK-NEXT:     thread.yield %[[Q]], %[[R]] : tensor<4x64xf16>, tensor<4x1xf16>
// CHECK-NEXT:   }
// CHECK-NEXT:   block.output %[[G]] omap [0, -1, -1] : tensor<4x64xf16>
// CHECK-NEXT:   block.output %[[H]] omap [0, -1, -1] : tensor<4x1xf16>
func.func @fused(%x: tensor<16x64xf16>) -> (tensor<16x64xf16>, tensor<16x1xf16>) {
  %o:2 = kernel.customized(%x) grid [4, 1, 1] block [128, 1, 1] forloop 1 : (tensor<16x64xf16>) -> (tensor<16x64xf16>, tensor<16x1xf16>) {
  ^bb0(%a: tensor<16x64xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<16x64xf16> -> tensor<4x64xf16>
    %s = block.reduce_sum %t dim 1 : tensor<4x64xf16> -> tensor<4x1xf16>
    %g:2 = block.thread_graph(%t, %s) : (tensor<4x64xf16>, tensor<4x1xf16>) -> (tensor<4x64xf16>, tensor<4x1xf16>) {
    ^bb0(%x0: tensor<4x64xf16>, %y0: tensor<4x1xf16>):
      %a0 = thread.add %x0, %y0 : tensor<4x64xf16>, tensor<4x1xf16> -> tensor<4x64xf16>
      %m0 = thread.mul %a0, %x0 : tensor<4x64xf16>, tensor<4x64xf16> -> tensor<4x64xf16>
      %d0 = thread.div %m0, %y0 : tensor<4x64xf16>, tensor<4x1xf16> -> tensor<4x64xf16>
      %e0 = thread.exp %d0 : tensor<4x64xf16> -> tensor<4x64xf16>
      %l0 = thread.silu %e0 : tensor<4x64xf16> -> tensor<4x64xf16>
      %q0 = thread.sqrt %l0 : tensor<4x64xf16> -> tensor<4x64xf16>
      %r0 = thread.square %y0 : tensor<4x1xf16> -> tensor<4x1xf16>
      thread.yield %q0, %r0 : tensor<4x64xf16>, tensor<4x1xf16>
    }
    block.output %g#0 omap [0, -1, -1] : tensor<4x64xf16>
    block.output %g#1 omap [0, -1, -1] : tensor<4x1xf16>
  }
  func.return %o#0, %o#1 : tensor<16x64xf16>, tensor<16x1xf16>
}
