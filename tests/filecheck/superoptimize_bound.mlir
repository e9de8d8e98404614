// RUN: mirage-opt -p 'superoptimize{cache-dir=none jobs=1}' %s -o %t.mlir 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: mirage-opt %t.mlir | filecheck %s

// A residual add, then RMSNorm, over 8 x 4096 rows, two kernels deep (the
// default): the first depth finds one kernel of whole rows, and no pair of
// kernels can cost less by the model (two launches and first loads alone do
// not), so the cost bound drops every second-depth prefix and the search
// completes in seconds.

// REPORT: superoptimize @residual_rms_norm: {{[0-9]+}} graphs explored, {{[0-9]+}} pruned by abstract expression, {{[1-9][0-9]*}} deeper prefixes and {{[0-9]+}} tasks cut by the cost bound, {{.*}}; kernels 2 -> 1;
// REPORT-NOT: stopped

// CHECK:      func.func @residual_rms_norm(
// CHECK-NEXT:   kernel.customized
// CHECK-SAME:   forloop 1
// CHECK:        block.add
// CHECK:        block.rms_norm
// CHECK-NOT:  kernel.customized
builtin.module {
  func.func @residual_rms_norm(%0: tensor<8x4096xf16>, %1: tensor<8x4096xf16>) -> tensor<8x4096xf16> {
    %2 = kernel.add %0, %1 : tensor<8x4096xf16>, tensor<8x4096xf16> -> tensor<8x4096xf16>
    %3 = kernel.rms_norm %2 : tensor<8x4096xf16> -> tensor<8x4096xf16>
    func.return %3 : tensor<8x4096xf16>
  }
}
