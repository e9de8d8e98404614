// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A result type that contradicts the op's shape rule: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/result_shape.mlir:7:3: error: 'kernel.exp' result shape [4, 1] does not match the expected [4, 8]{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x1xf16> {
  %s = kernel.exp %a : tensor<4x8xf16> -> tensor<4x1xf16>
  func.return %s : tensor<4x1xf16>
}
