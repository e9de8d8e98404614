// RUN: not mirage-opt %s 2>&1 | filecheck %s
// Element-wise operands of different ranks: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/broadcast_rank.mlir:7:3: error: 'kernel.mul': operand ranks differ (2 vs 1){{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>, %b: tensor<8xf16>) -> tensor<4x8xf16> {
  %s = kernel.mul %a, %b : tensor<4x8xf16>, tensor<8xf16> -> tensor<4x8xf16>
  func.return %s : tensor<4x8xf16>
}
