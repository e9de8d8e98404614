// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Ops at the wrong level: each level's ops live only in their own parent. Each
// case is one chunk and prints exactly one located line; without
// --verify-diagnostics the first one stops the run with exit code 1.
// FIRST: {{\A.*}}errors/nesting.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// A block op outside any customized kernel.
// CHECK: {{\A.*}}errors/nesting.mlir:[[# @LINE + 2]]:3: error: 'block.exp' expects parent op 'kernel.customized'{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = block.exp %a : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %e : tensor<4x8xf16>
}

// -----

// A block-level maximum outside a customized kernel.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/nesting.mlir:[[# @LINE + 2]]:3: error: 'block.reduce_max' expects parent op 'kernel.customized'{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x1xf16> {
  %m = block.reduce_max %a dim 1 : tensor<4x8xf16> -> tensor<4x1xf16>
  func.return %m : tensor<4x1xf16>
}

// -----

// A thread op directly in a block graph.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/nesting.mlir:[[# @LINE + 5]]:5: error: 'thread.exp' expects parent op 'block.thread_graph'{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %e = thread.exp %t : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %e omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// A thread-level activation outside a thread graph.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/nesting.mlir:[[# @LINE + 2]]:3: error: 'thread.tanh' expects parent op 'block.thread_graph'{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %t = thread.tanh %a : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %t : tensor<4x8xf16>
}

// -----

// A thread graph holding a block op.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/nesting.mlir:[[# @LINE + 7]]:7: error: 'block.exp' expects parent op 'kernel.customized'{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %g = block.thread_graph(%t) : (tensor<8x32xf16>) -> tensor<8x32xf16> {
    ^bb0(%v: tensor<8x32xf16>):
      %e = block.exp %v : tensor<8x32xf16> -> tensor<8x32xf16>
      thread.yield %e : tensor<8x32xf16>
    }
    block.output %g omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// A kernel op inside a block graph.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/nesting.mlir:[[# @LINE + 6]]:5: error: 'kernel.exp' cannot be in a block graph; 'kernel.customized' regions hold only block ops{{$}}
// CHECK-NOT: {{.}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %e = kernel.exp %t : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %e omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
