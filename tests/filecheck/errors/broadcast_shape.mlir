// RUN: not mirage-opt %s 2>&1 | filecheck %s
// Element-wise operands that do not broadcast: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/broadcast_shape.mlir:7:3: error: 'kernel.add': dimension 1 does not broadcast (8 vs 3); sizes must be equal or one of them 1{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>, %b: tensor<4x3xf16>) -> tensor<4x8xf16> {
  %s = kernel.add %a, %b : tensor<4x8xf16>, tensor<4x3xf16> -> tensor<4x8xf16>
  func.return %s : tensor<4x8xf16>
}
