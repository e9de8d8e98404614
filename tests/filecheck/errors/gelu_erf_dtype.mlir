// RUN: not mirage-opt %s 2>&1 | filecheck %s
// An activation keeps its operand's element type: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/gelu_erf_dtype.mlir:7:3: error: 'kernel.gelu_erf' mixes element types ['f16', 'f32']; they must agree{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf32> {
  %g = kernel.gelu_erf %a : tensor<4x8xf16> -> tensor<4x8xf32>
  func.return %g : tensor<4x8xf32>
}
