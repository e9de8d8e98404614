// RUN: mirage-opt %s | mirage-opt | filecheck %s
// The the two GELUs: tanh approximation and exact (erf), at the kernel, block and thread levels: each prints in its
// custom form and parses back, with its operand and the dtype kept.

// CHECK-LABEL: func.func @kernel_level(
// CHECK-SAME:  %[[X:.*]]: tensor<4x16xf16>, %[[Y:.*]]: tensor<2x3xbf16>
// CHECK:       %[[A:.*]] = kernel.gelu %[[X]] : tensor<4x16xf16> -> tensor<4x16xf16>
// CHECK-NEXT:  %[[B:.*]] = kernel.gelu_erf %[[A]] : tensor<4x16xf16> -> tensor<4x16xf16>
// CHECK-NEXT:  %[[C:.*]] = kernel.gelu %[[Y]] : tensor<2x3xbf16> -> tensor<2x3xbf16>
// CHECK-NEXT:  func.return %[[B]], %[[C]]
func.func @kernel_level(%x: tensor<4x16xf16>, %y: tensor<2x3xbf16>) -> (tensor<4x16xf16>, tensor<2x3xbf16>) {
  %a = kernel.gelu %x : tensor<4x16xf16> -> tensor<4x16xf16>
  %b = kernel.gelu_erf %a : tensor<4x16xf16> -> tensor<4x16xf16>
  %c = kernel.gelu %y : tensor<2x3xbf16> -> tensor<2x3xbf16>
  func.return %b, %c : tensor<4x16xf16>, tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @block_and_thread_level
// CHECK:        %[[T:.*]] = block.input %{{.*}} imap [0, -1, -1] fmap -1 : tensor<16x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:   %[[BA:.*]] = block.gelu %[[T]] : tensor<4x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:   %[[BB:.*]] = block.gelu_erf %[[BA]] : tensor<4x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:   %[[G:.*]] = block.thread_graph(%[[BB]]) : (tensor<4x64xf16>) -> tensor<4x64xf16> {
// CHECK-NEXT:   ^{{.*}}(%[[U:.*]]: tensor<4x64xf16>):
// CHECK-NEXT:     %[[TA:.*]] = thread.gelu %[[U]] : tensor<4x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:     %[[TB:.*]] = thread.gelu_erf %[[TA]] : tensor<4x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:     thread.yield %[[TB]] : tensor<4x64xf16>
// CHECK-NEXT:   }
// CHECK-NEXT:   block.output %[[G]] omap [0, -1, -1] : tensor<4x64xf16>
func.func @block_and_thread_level(%x: tensor<16x64xf16>) -> tensor<16x64xf16> {
  %o = kernel.customized(%x) grid [4, 1, 1] block [128, 1, 1] forloop 1 : (tensor<16x64xf16>) -> tensor<16x64xf16> {
  ^bb0(%in: tensor<16x64xf16>):
    %t = block.input %in imap [0, -1, -1] fmap -1 : tensor<16x64xf16> -> tensor<4x64xf16>
    %ba = block.gelu %t : tensor<4x64xf16> -> tensor<4x64xf16>
    %bb = block.gelu_erf %ba : tensor<4x64xf16> -> tensor<4x64xf16>
    %g = block.thread_graph(%bb) : (tensor<4x64xf16>) -> tensor<4x64xf16> {
    ^bb0(%u: tensor<4x64xf16>):
      %ta = thread.gelu %u : tensor<4x64xf16> -> tensor<4x64xf16>
      %tb = thread.gelu_erf %ta : tensor<4x64xf16> -> tensor<4x64xf16>
      thread.yield %tb : tensor<4x64xf16>
    }
    block.output %g omap [0, -1, -1] : tensor<4x64xf16>
  }
  func.return %o : tensor<16x64xf16>
}
