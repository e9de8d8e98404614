// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A malformed tensor type: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/syntax_bad_type.mlir:7:51: error: expected 'x' in shape delimiter, found 'y8xf16'{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = kernel.exp %a : tensor<4x8xf16> -> tensor<4y8xf16>
  func.return %e : tensor<4x8xf16>
}
