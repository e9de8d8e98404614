// RUN: not mirage-opt %s 2>&1 | filecheck %s
// Integer tensors, which no µGraph op takes: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/dtype_integer.mlir:7:3: error: 'kernel.exp' expects f16, bf16 or f32 elements, got i32{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xi32>) -> tensor<4x8xi32> {
  %s = kernel.exp %a : tensor<4x8xi32> -> tensor<4x8xi32>
  func.return %s : tensor<4x8xi32>
}
