// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A maximum keeps its reduced dim with size 1: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/reduce_max_result_shape.mlir:7:3: error: 'kernel.reduce_max' result shape [4] does not match the expected [4, 1]{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4xf16> {
  %m = kernel.reduce_max %a dim 1 : tensor<4x8xf16> -> tensor<4xf16>
  func.return %m : tensor<4xf16>
}
