// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A token where an op should start: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/syntax_stray_token.mlir:8:3: error: expected an operation, a block label or '}', found '='{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = kernel.exp %a : tensor<4x8xf16> -> tensor<4x8xf16>
  = func.return %e : tensor<4x8xf16>
}
