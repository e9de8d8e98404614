// RUN: mirage-verify %s %examples/lora.mlir | filecheck %s
// RUN: mirage-verify %s %examples/lora.mlir --device cpu | filecheck %s
// RUN: not mirage-verify %s %examples/gated_mlp.mlir 2>&1 | filecheck %s --check-prefix=SIG
// RUN: not mirage-verify %s %S/inputs/lora_wrong.mlir | filecheck %s --check-prefix=WRONG
// RUN: not mirage-verify %s %S/inputs/nothere.mlir 2>&1 | filecheck %s --check-prefix=MISSING

// LoRA as X·(W + A·B), against the plain X·W + (X·A)·B.
// CHECK: verdict: equivalent
// CHECK-NEXT: reason: all outputs agree on {{[0-9]+}} random trial(s) over Z_p x Z_q
// CHECK-NEXT: trials: {{[0-9]+}} (per-trial bound {{.*}})
// CHECK-NEXT: false-positive bound: {{.*}} (2^-{{[4-9][0-9]}}.{{[0-9]}})
// CHECK-NEXT: seconds:
// CHECK-NEXT: float cross-check: agree in fp32

// SIG: verdict: NOT equivalent
// SIG-NEXT: reason: signatures differ: the programs have 4 and 3 inputs

// WRONG: verdict: NOT equivalent
// WRONG-NEXT: reason: output #0 differs at index
// WRONG: float cross-check: disagree in fp32

// MISSING: nothere.mlir: error: No such file or directory
// MISSING-NOT: Traceback
func.func @lora(%x: tensor<1x256xf16>, %w: tensor<256x4096xf16>, %a: tensor<256x16xf16>, %b: tensor<16x4096xf16>) -> tensor<1x4096xf16> {
  %ab = kernel.matmul %a, %b : tensor<256x16xf16>, tensor<16x4096xf16> -> tensor<256x4096xf16>
  %s = kernel.add %w, %ab : tensor<256x4096xf16>, tensor<256x4096xf16> -> tensor<256x4096xf16>
  %o = kernel.matmul %x, %s : tensor<1x256xf16>, tensor<256x4096xf16> -> tensor<1x4096xf16>
  func.return %o : tensor<1x4096xf16>
}
