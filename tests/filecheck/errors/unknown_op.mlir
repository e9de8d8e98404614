// RUN: not mirage-opt %s 2>&1 | filecheck %s
// An op no dialect defines, with a suggestion: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/unknown_op.mlir:7:8: error: unknown operation 'kernel.expo' (did you mean 'kernel.exp'?){{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = kernel.expo %a : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %e : tensor<4x8xf16>
}
