// RUN: mirage-opt -p legalize-for-triton %examples/lora_fused.mlir | filecheck %s
// RUN: mirage-opt -p 'legalize-for-triton{small-matmul=fma}' %examples/lora_fused.mlir | filecheck %s --check-prefix=FMA
// RUN: mirage-opt -p legalize-for-triton %examples/rmsnorm_linear_fused.mlir | filecheck %s --check-prefix=RMS

// The matmul of concatenations along K becomes a sum of two matmuls, and the
// batch-1 row is padded to 16 for tl.dot.
// CHECK:      %[[X:.*]] = block.input %{{.*}} {triton.tile = array<i64: 16, 256>} : tensor<1x256xf16>
// CHECK:      %[[XA:.*]] = block.matmul %[[X]], %{{.*}} {triton.tile = array<i64: 16, 16>, triton.matmul = "dot"}
// CHECK-NEXT: %[[XW:.*]] = block.matmul %[[X]], %{{.*}} {triton.tile = array<i64: 16, 64>, triton.matmul = "dot"}
// CHECK-NEXT: %[[XAB:.*]] = block.matmul %[[XA]], %{{.*}} {triton.tile = array<i64: 16, 64>, triton.matmul = "dot"}
// CHECK-NEXT: %[[SUM:.*]] = block.add %[[XW]], %[[XAB]]
// CHECK-NOT:  block.concat
// CHECK:      block.output %[[SUM]]

// Multiply-and-sum needs no padding of the row.
// FMA:        block.input %{{.*}} {triton.tile = array<i64: 1, 256>} : tensor<1x256xf16>
// FMA:        block.matmul {{.*}}triton.matmul = "fma"

// Thread graphs are absent here; reductions keep their padded rows in step
// with the dot they feed.
// RMS:        block.input %{{.*}} fmap 1 {triton.tile = array<i64: 16, 64>} : tensor<2x4096xf16> -> tensor<2x64xf16>
// RMS:        block.forloop_accum %{{.*}} reduce "rms" {triton.tile = array<i64: 16, 1>}
