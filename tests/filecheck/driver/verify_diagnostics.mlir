// RUN: mirage-opt --split-input-file --verify-diagnostics %s | filecheck %s
// xDSL's --verify-diagnostics prints our one-line errors and carries on, so
// one file can hold several error cases.

// CHECK: {{.*}}verify_diagnostics.mlir:7:3: error: 'kernel.exp' result shape [4, 1] does not match the expected [4, 8]
func.func @bad_shape(%a: tensor<4x8xf16>) -> tensor<4x1xf16> {
  %e = kernel.exp %a : tensor<4x8xf16> -> tensor<4x1xf16>
  func.return %e : tensor<4x1xf16>
}

// -----

// CHECK: {{.*}}verify_diagnostics.mlir:15:3: error: 'block.exp' expects parent op 'kernel.customized'
func.func @outside(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %e = block.exp %a : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %e : tensor<4x8xf16>
}
