// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A NaN constant has no meaning (the custom form has no NaN literal, the
// generic form does): exit code 1 and one located line naming the problem.
// CHECK: {{\A.*}}dialects/scalar_nan.mlir:8:3: error: 'kernel.mul_scalar' scalar must be a finite number, got nan{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %s = "kernel.mul_scalar"(%x) <{scalar = 0x7FF8000000000000 : f64}> : (tensor<4x8xf16>) -> tensor<4x8xf16>
  func.return %s : tensor<4x8xf16>
}
