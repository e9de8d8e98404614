// The GQA pattern emitted at batch 1 rewrites GQA at batch 8 and leaves the
// unrelated op alone; the interpreter confirms the result.
// RUN: env MIRAGE_CACHE_DIR=off mirage-opt -p 'apply-mirage-rewrites{library="%S/inputs/gqa_b1_rewrite.mlir"}' %s | filecheck %s
// RUN: env MIRAGE_CACHE_DIR=off mirage-opt -p 'apply-mirage-rewrites{library="%S/inputs/gqa_b1_rewrite.mlir" quiet=true}' %s -o %t.mlir
// RUN: mirage-run %t.mlir --compare %s --amplitude 0.5 | filecheck %s --check-prefix=CMP

// CHECK-LABEL: func.func @layer
// CHECK:       kernel.customized({{.*}}) grid [2, 4, 8] block [128, 1, 1] forloop 2
// CHECK:       kernel.customized({{.*}}) grid [2, 4, 8] block [128, 1, 1] forloop 4
// CHECK-NOT:   kernel.matmul
// CHECK:       %[[X:.*]] = kernel.exp %{{.*}} : tensor<8x64xf16> -> tensor<8x64xf16>
// CHECK:       func.return %{{.*}}, %[[X]]
// CMP:         relative difference to {{.*}}: {{.*}} (match)

func.func @layer(%q: tensor<8x2x32x64xf16>, %k: tensor<8x2x64x512xf16>, %v: tensor<8x2x512x64xf16>, %x: tensor<8x64xf16>) -> (tensor<8x2x32x64xf16>, tensor<8x64xf16>) {
  %a = kernel.matmul %q, %k : tensor<8x2x32x64xf16>, tensor<8x2x64x512xf16> -> tensor<8x2x32x512xf16>
  %e = kernel.exp %a : tensor<8x2x32x512xf16> -> tensor<8x2x32x512xf16>
  %s = kernel.reduce_sum %e dim 3 : tensor<8x2x32x512xf16> -> tensor<8x2x32x1xf16>
  %d = kernel.div %e, %s : tensor<8x2x32x512xf16>, tensor<8x2x32x1xf16> -> tensor<8x2x32x512xf16>
  %o = kernel.matmul %d, %v : tensor<8x2x32x512xf16>, tensor<8x2x512x64xf16> -> tensor<8x2x32x64xf16>
  %y = kernel.exp %x : tensor<8x64xf16> -> tensor<8x64xf16>
  func.return %o, %y : tensor<8x2x32x64xf16>, tensor<8x64xf16>
}
