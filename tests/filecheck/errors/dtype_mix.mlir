// RUN: not mirage-opt %s 2>&1 | filecheck %s
// Operands of different element types: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/dtype_mix.mlir:7:3: error: 'kernel.add' mixes element types ['f16', 'f32']; they must agree{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>, %b: tensor<4x8xf32>) -> tensor<4x8xf16> {
  %s = kernel.add %a, %b : tensor<4x8xf16>, tensor<4x8xf32> -> tensor<4x8xf16>
  func.return %s : tensor<4x8xf16>
}
