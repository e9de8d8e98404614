// RUN: mirage-opt -p 'superoptimize{max-kernels=1 cache-dir=none jobs=1}' %s -o %t.mlir 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: mirage-opt %t.mlir | filecheck %s
// RUN: mirage-run %t.mlir --compare %s | filecheck %s --check-prefix=SAME

// GQA at reduced shapes, from the plain program: the search's µGraph prints,
// parses again, and the interpreter confirms it computes the input's function.

// REPORT: superoptimize @gqa: {{[0-9]+}} graphs explored, {{[0-9]+}} pruned by abstract expression, {{.*}} verified (finite-field); kernels 5 -> 1;

// One kernel that accumulates over the keys in its for-loop, FlashAttention-like:
// CHECK:      func.func @gqa(
// CHECK:        kernel.customized
// CHECK-SAME:     forloop {{[2-9]|[1-9][0-9]+}}
// CHECK-DAG:      block.forloop_accum {{.*}} reduce "sum"
// CHECK-DAG:      block.forloop_accum {{.*}} reduce "none"
// CHECK:          block.div
// CHECK:          block.output
// CHECK-NOT:    kernel.
// CHECK:        func.return

// SAME: relative difference to {{.*}}superoptimize_gqa.mlir: {{.*}} (match)

func.func @gqa(%0: tensor<1x2x16x64xf16>, %1: tensor<1x2x64x256xf16>, %2: tensor<1x2x256x64xf16>) -> tensor<1x2x16x64xf16> {
  %3 = kernel.matmul %0, %1 : tensor<1x2x16x64xf16>, tensor<1x2x64x256xf16> -> tensor<1x2x16x256xf16>
  %4 = kernel.exp %3 : tensor<1x2x16x256xf16> -> tensor<1x2x16x256xf16>
  %5 = kernel.reduce_sum %4 dim 3 : tensor<1x2x16x256xf16> -> tensor<1x2x16x1xf16>
  %6 = kernel.div %4, %5 : tensor<1x2x16x256xf16>, tensor<1x2x16x1xf16> -> tensor<1x2x16x256xf16>
  %7 = kernel.matmul %6, %2 : tensor<1x2x16x256xf16>, tensor<1x2x256x64xf16> -> tensor<1x2x16x64xf16>
  func.return %7 : tensor<1x2x16x64xf16>
}
