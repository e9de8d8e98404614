// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A use of a value never defined: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/syntax_undefined_value.mlir:7:19: error: use of undefined value '%b'{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = kernel.exp %b : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %e : tensor<4x8xf16>
}
