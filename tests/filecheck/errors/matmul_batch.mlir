// RUN: not mirage-opt %s 2>&1 | filecheck %s
// Batched matmul whose batch dims differ: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/matmul_batch.mlir:7:3: error: 'kernel.matmul': matmul batch dims differ ([2] vs [3]){{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<2x4x8xf16>, %b: tensor<3x8x4xf16>) -> tensor<2x4x4xf16> {
  %m = kernel.matmul %a, %b : tensor<2x4x8xf16>, tensor<3x8x4xf16> -> tensor<2x4x4xf16>
  func.return %m : tensor<2x4x4xf16>
}
