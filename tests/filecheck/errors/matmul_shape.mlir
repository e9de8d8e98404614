// RUN: not mirage-opt %s 2>&1 | filecheck %s
// Matmul operands whose contraction dims differ: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/matmul_shape.mlir:7:3: error: 'kernel.matmul': matmul contraction dims differ (lhs has 8, rhs has 16){{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>, %b: tensor<16x4xf16>) -> tensor<4x4xf16> {
  %m = kernel.matmul %a, %b : tensor<4x8xf16>, tensor<16x4xf16> -> tensor<4x4xf16>
  func.return %m : tensor<4x4xf16>
}
