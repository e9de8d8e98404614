// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A maximum over a dim the tensor does not have: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/reduce_max_dim.mlir:7:3: error: 'kernel.reduce_max': reduction dim -1 out of range for rank 2{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x1xf16> {
  %m = kernel.reduce_max %a dim -1 : tensor<4x8xf16> -> tensor<4x1xf16>
  func.return %m : tensor<4x1xf16>
}
