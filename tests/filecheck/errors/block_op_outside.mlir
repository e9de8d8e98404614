// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A block op outside any customized kernel: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/block_op_outside.mlir:7:3: error: 'block.exp' expects parent op 'kernel.customized'{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = block.exp %a : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %e : tensor<4x8xf16>
}
