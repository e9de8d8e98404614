// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Parse errors. The input that ends inside a region comes last: its chunk ends
// where the file does. Each case is one chunk and prints exactly one located
// line; without --verify-diagnostics the first one stops the run with exit code
// 1.
// FIRST: {{\A.*}}errors/syntax.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// An op no dialect defines, with a suggestion.
// CHECK: {{\A.*}}errors/syntax.mlir:[[# @LINE + 2]]:8: error: unknown operation 'kernel.expo' (did you mean 'kernel.exp'?){{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = kernel.expo %a : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %e : tensor<4x8xf16>
}

// -----

// A use of a value never defined.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/syntax.mlir:[[# @LINE + 2]]:3: error: 'kernel.exp' uses undefined value '%b'{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = kernel.exp %b : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %e : tensor<4x8xf16>
}

// -----

// A malformed tensor type.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/syntax.mlir:[[# @LINE + 2]]:51: error: expected 'x' in shape delimiter, found 'y8xf16'{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = kernel.exp %a : tensor<4x8xf16> -> tensor<4y8xf16>
  func.return %e : tensor<4x8xf16>
}

// -----

// A block label starting with a digit.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/syntax.mlir:[[# @LINE + 3]]:3: error: block label '^5' must start with a letter or '_'{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %o = kernel.customized(%a) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<4x8xf16>) -> tensor<4x8xf16> {
  ^5(%b: tensor<4x8xf16>):
    %t = block.input %b imap [-1, -1, -1] fmap -1 : tensor<4x8xf16> -> tensor<4x8xf16>
    block.output %t omap [-1, -1, -1] : tensor<4x8xf16>
  }
  func.return %o : tensor<4x8xf16>
}

// -----

// An integer that does not fit 64 bits.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/syntax.mlir:[[# @LINE + 2]]:36: error: integer 9223372036854775808 does not fit in 64 bits{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [9223372036854775808, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// A token where an op should start.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/syntax.mlir:[[# @LINE + 3]]:3: error: expected an operation, a block label or '}', found '='{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = kernel.exp %a : tensor<4x8xf16> -> tensor<4x8xf16>
  = func.return %e : tensor<4x8xf16>
}

// -----

// A string literal that is never closed.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/syntax.mlir:[[# @LINE + 5]]:40: error: string literal is never closed{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<8x8xf16>
    %s = block.forloop_accum %t reduce "none : tensor<8x8xf16> -> tensor<8x8xf16>
    block.output %s omap [-1, -1, -1] : tensor<8x8xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// Input that ends inside a region.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/syntax.mlir:[[# @LINE + 5]]:1: error: unexpected end of input: '{' at [[# @LINE + 2]]:54 is never closed{{$}}
// CHECK-NOT: {{.}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = kernel.exp %a : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %e : tensor<4x8xf16>
