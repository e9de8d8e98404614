// RUN: mirage-opt %s | mirage-opt | filecheck %s
// RUN: mirage-opt -t triton %s | filecheck %s --check-prefix=TRITON
// RUN: mirage-opt -t cuda %s | filecheck %s --check-prefix=CUDA
// The natural logarithm at the kernel, block and thread levels: each prints in
// its custom form and parses back; the Triton kernels call tl.log, the CUDA C
// kernels logf.

// CHECK-LABEL: func.func @log_softmax(
// CHECK:       %[[E:.*]] = kernel.exp %{{.*}} : tensor<4x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:  %[[S:.*]] = kernel.reduce_sum %[[E]] dim 1 : tensor<4x64xf16> -> tensor<4x1xf16>
// CHECK-NEXT:  %[[L:.*]] = kernel.log %[[S]] : tensor<4x1xf16> -> tensor<4x1xf16>
// CHECK-NEXT:  %[[N:.*]] = kernel.neg %[[L]] : tensor<4x1xf16> -> tensor<4x1xf16>
// CHECK-NEXT:  kernel.add %{{.*}}, %[[N]]
// TRITON:      def log_softmax_k{{[0-9]+}}(
// TRITON:      tl.log(
// CUDA:        logf(
func.func @log_softmax(%x: tensor<4x64xf16>) -> tensor<4x64xf16> {
  %e = kernel.exp %x : tensor<4x64xf16> -> tensor<4x64xf16>
  %s = kernel.reduce_sum %e dim 1 : tensor<4x64xf16> -> tensor<4x1xf16>
  %l = kernel.log %s : tensor<4x1xf16> -> tensor<4x1xf16>
  %n = kernel.neg %l : tensor<4x1xf16> -> tensor<4x1xf16>
  %o = kernel.add %x, %n : tensor<4x64xf16>, tensor<4x1xf16> -> tensor<4x64xf16>
  func.return %o : tensor<4x64xf16>
}

// CHECK-LABEL: func.func @block_and_thread_level
// CHECK:        %[[T:.*]] = block.input %{{.*}} imap [0, -1, -1] fmap -1 : tensor<16x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:   %[[BL:.*]] = block.log %[[T]] : tensor<4x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:   %[[G:.*]] = block.thread_graph(%[[BL]]) : (tensor<4x64xf16>) -> tensor<4x64xf16> {
// CHECK-NEXT:   ^{{.*}}(%[[U:.*]]: tensor<4x64xf16>):
// CHECK-NEXT:     %[[TL:.*]] = thread.log %[[U]] : tensor<4x64xf16> -> tensor<4x64xf16>
// CHECK-NEXT:     thread.yield %[[TL]] : tensor<4x64xf16>
func.func @block_and_thread_level(%x: tensor<16x64xf16>) -> tensor<16x64xf16> {
  %o = kernel.customized(%x) grid [4, 1, 1] block [128, 1, 1] forloop 1 : (tensor<16x64xf16>) -> tensor<16x64xf16> {
  ^bb0(%in: tensor<16x64xf16>):
    %t = block.input %in imap [0, -1, -1] fmap -1 : tensor<16x64xf16> -> tensor<4x64xf16>
    %bl = block.log %t : tensor<4x64xf16> -> tensor<4x64xf16>
    %g = block.thread_graph(%bl) : (tensor<4x64xf16>) -> tensor<4x64xf16> {
    ^bb0(%u: tensor<4x64xf16>):
      %tl = thread.log %u : tensor<4x64xf16> -> tensor<4x64xf16>
      thread.yield %tl : tensor<4x64xf16>
    }
    block.output %g omap [0, -1, -1] : tensor<4x64xf16>
  }
  func.return %o : tensor<16x64xf16>
}
