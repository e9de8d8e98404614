// RUN: mirage-opt -p default-customize,fuse-thread-graphs,legalize-for-triton %examples/gated_mlp.mlir | filecheck %s

// fuse-thread-graphs made a thread graph of silu and mul; Triton keeps every
// value in registers anyway, so legalisation inlines it back as block ops.
// CHECK-NOT:  block.thread_graph
// CHECK:      block.silu
// CHECK-SAME: triton.tile
// CHECK:      block.mul
// CHECK-NOT:  thread.
