// RUN: mirage-opt -p 'verify-equivalent{against="%examples/lora.mlir"}' %s | filecheck %s
// RUN: not mirage-opt -p 'verify-equivalent{against="%S/inputs/lora_wrong.mlir"}' %s 2>&1 | filecheck %s --check-prefix=WRONG
// RUN: not mirage-opt -p 'verify-equivalent{against="%examples/gqa.mlir"}' %s 2>&1 | filecheck %s --check-prefix=SIG
// RUN: not mirage-opt -p 'verify-equivalent{against="%S/inputs/nothere.mlir"}' %s 2>&1 | filecheck %s --check-prefix=MISSING

// The pass leaves an equivalent module unchanged.
// CHECK:      func.func @lora
// CHECK-NEXT:   %{{.*}} = kernel.matmul %{{.*}}, %{{.*}} : tensor<256x16xf16>, tensor<16x4096xf16> -> tensor<256x4096xf16>

// WRONG: error: verify-equivalent: the module is not equivalent to {{.*}}lora_wrong.mlir: output #0 differs at index
// SIG: error: verify-equivalent: the module is not equivalent to {{.*}}gqa.mlir: signatures differ: the programs have 4 and 3 inputs
// MISSING: nothere.mlir: error: No such file or directory (verify-equivalent against=)
// MISSING-NOT: Traceback
func.func @lora(%x: tensor<1x256xf16>, %w: tensor<256x4096xf16>, %a: tensor<256x16xf16>, %b: tensor<16x4096xf16>) -> tensor<1x4096xf16> {
  %ab = kernel.matmul %a, %b : tensor<256x16xf16>, tensor<16x4096xf16> -> tensor<256x4096xf16>
  %s = kernel.add %w, %ab : tensor<256x4096xf16>, tensor<256x4096xf16> -> tensor<256x4096xf16>
  %o = kernel.matmul %x, %s : tensor<1x256xf16>, tensor<256x4096xf16> -> tensor<1x4096xf16>
  func.return %o : tensor<1x4096xf16>
}
