// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Verifier errors of 'block.thread_graph': its terminator and what it yields.
// Each case is one chunk and prints exactly one located line; without
// --verify-diagnostics the first one stops the run with exit code 1.
// FIRST: {{\A.*}}errors/thread_graph.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// A thread graph that does not end in thread.yield.
// CHECK: {{\A.*}}errors/thread_graph.mlir:[[# @LINE + 5]]:5: error: 'block.thread_graph' region must end in a terminator, but its last op is 'thread.exp'{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %g = block.thread_graph(%t) : (tensor<8x32xf16>) -> tensor<8x32xf16> {
    ^bb0(%v: tensor<8x32xf16>):
      %e = thread.exp %v : tensor<8x32xf16> -> tensor<8x32xf16>
    }
    block.output %g omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// A thread graph yielding types other than its results.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/thread_graph.mlir:[[# @LINE + 6]]:5: error: 'block.thread_graph' yields types that do not match its results{{$}}
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
