// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A block-level maximum outside a customized kernel: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/reduce_max_outside.mlir:7:3: error: 'block.reduce_max' expects parent op 'kernel.customized'{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x1xf16> {
  %m = block.reduce_max %a dim 1 : tensor<4x8xf16> -> tensor<4x1xf16>
  func.return %m : tensor<4x1xf16>
}
