// RUN: not mirage-opt %s 2>&1 | filecheck %s
// Input that ends inside a region: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/syntax_missing_brace.mlir:9:1: error: unexpected end of input: '{' at 6:54 is never closed{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = kernel.exp %a : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %e : tensor<4x8xf16>
