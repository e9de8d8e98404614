// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A reduction over a dim the tensor does not have: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/reduce_dim.mlir:7:3: error: 'kernel.reduce_sum': reduction dim 2 out of range for rank 2{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %s = kernel.reduce_sum %a dim 2 : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %s : tensor<4x8xf16>
}
