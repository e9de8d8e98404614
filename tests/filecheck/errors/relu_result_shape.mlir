// RUN: not mirage-opt %s 2>&1 | filecheck %s
// An activation's result must have its operand's shape: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/relu_result_shape.mlir:7:3: error: 'kernel.relu' result shape [4, 1] does not match the expected [4, 8]{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x1xf16> {
  %r = kernel.relu %a : tensor<4x8xf16> -> tensor<4x1xf16>
  func.return %r : tensor<4x1xf16>
}
