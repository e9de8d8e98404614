// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Verifier errors of 'kernel.matmul': contraction and batch dims. Each case is
// one chunk and prints exactly one located line; without --verify-diagnostics
// the first one stops the run with exit code 1.
// FIRST: {{\A.*}}errors/kernel_matmul.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// Matmul operands whose contraction dims differ.
// CHECK: {{\A.*}}errors/kernel_matmul.mlir:[[# @LINE + 2]]:3: error: 'kernel.matmul': matmul contraction dims differ (lhs has 8, rhs has 16){{$}}
func.func @f(%a: tensor<4x8xf16>, %b: tensor<16x4xf16>) -> tensor<4x4xf16> {
  %m = kernel.matmul %a, %b : tensor<4x8xf16>, tensor<16x4xf16> -> tensor<4x4xf16>
  func.return %m : tensor<4x4xf16>
}

// -----

// Batched matmul whose batch dims differ.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_matmul.mlir:[[# @LINE + 3]]:3: error: 'kernel.matmul': matmul batch dims differ ([2] vs [3]); they must be equal, 1 or missing{{$}}
// CHECK-NOT: {{.}}
func.func @f(%a: tensor<2x4x8xf16>, %b: tensor<3x8x4xf16>) -> tensor<2x4x4xf16> {
  %m = kernel.matmul %a, %b : tensor<2x4x8xf16>, tensor<3x8x4xf16> -> tensor<2x4x4xf16>
  func.return %m : tensor<2x4x4xf16>
}
