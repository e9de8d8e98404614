// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Verifier errors of the reductions ('kernel.reduce_sum', 'kernel.reduce_max'):
// dim and result shape. Each case is one chunk and prints exactly one located
// line; without --verify-diagnostics the first one stops the run with exit code
// 1.
// FIRST: {{\A.*}}errors/kernel_reduce.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// A reduction over a dim the tensor does not have.
// CHECK: {{\A.*}}errors/kernel_reduce.mlir:[[# @LINE + 2]]:3: error: 'kernel.reduce_sum': reduction dim 2 out of range for rank 2{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %s = kernel.reduce_sum %a dim 2 : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %s : tensor<4x8xf16>
}

// -----

// A maximum over a dim the tensor does not have.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_reduce.mlir:[[# @LINE + 2]]:3: error: 'kernel.reduce_max': reduction dim -1 out of range for rank 2{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x1xf16> {
  %m = kernel.reduce_max %a dim -1 : tensor<4x8xf16> -> tensor<4x1xf16>
  func.return %m : tensor<4x1xf16>
}

// -----

// A maximum keeps its reduced dim with size 1.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_reduce.mlir:[[# @LINE + 3]]:3: error: 'kernel.reduce_max' result shape [4] does not match the expected [4, 1]{{$}}
// CHECK-NOT: {{.}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4xf16> {
  %m = kernel.reduce_max %a dim 1 : tensor<4x8xf16> -> tensor<4xf16>
  func.return %m : tensor<4xf16>
}
