// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Operands defined before their use and inside the isolated op that uses them.
// Each case is one chunk and prints exactly one located line; without
// --verify-diagnostics the first one stops the run with exit code 1.
// FIRST: {{\A.*}}errors/scopes.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// A block op using a value defined after it.
// CHECK: {{\A.*}}errors/scopes.mlir:[[# @LINE + 5]]:5: error: 'block.add' uses operand #1 before it is defined{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %s = block.add %t, %e : tensor<8x32xf16>, tensor<8x32xf16> -> tensor<8x32xf16>
    %e = block.exp %t : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %s omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// An op using its own result.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/scopes.mlir:[[# @LINE + 2]]:3: error: 'kernel.mul' uses operand #0 before it is defined{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = kernel.mul %e, %a : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %e : tensor<4x8xf16>
}

// -----

// A block op reading a device tensor without block.input.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/scopes.mlir:[[# @LINE + 5]]:5: error: 'block.add' uses operand #1 from outside its 'kernel.customized', which sees only its own arguments{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %s = block.add %t, %x : tensor<8x32xf16>, tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %s omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// A thread op reading a tile that is not an operand of its thread graph.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/scopes.mlir:[[# @LINE + 9]]:7: error: 'thread.add' uses operand #1 from outside its 'block.thread_graph', which sees only its own arguments{{$}}
// CHECK-NOT: {{.}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %u = block.exp %t : tensor<8x32xf16> -> tensor<8x32xf16>
    %g = block.thread_graph(%t) : (tensor<8x32xf16>) -> tensor<8x32xf16> {
    ^bb0(%v: tensor<8x32xf16>):
      %e = thread.add %v, %u : tensor<8x32xf16>, tensor<8x32xf16> -> tensor<8x32xf16>
      thread.yield %e : tensor<8x32xf16>
    }
    block.output %g omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
