// RUN: not mirage-opt %s 2>&1 | filecheck %s
// An op using its own result: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/use_before_def_self.mlir:7:3: error: 'kernel.mul' uses operand #0 before it is defined{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = kernel.mul %e, %a : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %e : tensor<4x8xf16>
}
