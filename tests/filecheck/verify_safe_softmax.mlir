// RUN: mirage-verify %S/inputs/safe_softmax.mlir %S/inputs/softmax_plain.mlir | filecheck %s
// RUN: not mirage-verify %s %S/inputs/softmax_plain.mlir | filecheck %s --check-prefix=HALF

// The safe softmax (row maximum subtracted) against the plain one: the shift
// cancels exactly in the field, so the verdict is equivalent with the usual bound.
// CHECK: verdict: equivalent
// CHECK-NEXT: reason: all outputs agree on {{[0-9]+}} random trial(s) over Z_p x Z_q
// CHECK-NEXT: trials: {{[0-9]+}} (per-trial bound {{.*}})
// CHECK-NEXT: false-positive bound: {{.*}} (2^-{{[4-9][0-9]}}.{{[0-9]}})
// CHECK: float cross-check: agree in fp32

// Shifting the numerator only, exp(x - max(x)) / sum(exp(x)), is not softmax.
// HALF: verdict: NOT equivalent
// HALF-NEXT: reason: output #0 differs at index
// HALF: float cross-check: disagree in fp32
func.func @half_shifted(%x: tensor<8x100xf16>) -> tensor<8x100xf16> {
  %m = kernel.reduce_max %x dim 1 : tensor<8x100xf16> -> tensor<8x1xf16>
  %n = kernel.neg %m : tensor<8x1xf16> -> tensor<8x1xf16>
  %s = kernel.add %x, %n : tensor<8x100xf16>, tensor<8x1xf16> -> tensor<8x100xf16>
  %e = kernel.exp %s : tensor<8x100xf16> -> tensor<8x100xf16>
  %p = kernel.exp %x : tensor<8x100xf16> -> tensor<8x100xf16>
  %t = kernel.reduce_sum %p dim 1 : tensor<8x100xf16> -> tensor<8x1xf16>
  %y = kernel.div %e, %t : tensor<8x100xf16>, tensor<8x1xf16> -> tensor<8x100xf16>
  func.return %y : tensor<8x100xf16>
}
