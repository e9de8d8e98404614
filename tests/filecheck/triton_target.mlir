// RUN: mirage-opt -t triton %examples/rmsnorm_linear_fused.mlir | filecheck %s
// RUN: mirage-opt -t triton %examples/gqa.mlir | filecheck %s --check-prefix=PLAIN

// One @triton.jit kernel per customized op, with the multiply-and-sum form
// beside it for the batch-2 matmul; the accumulator is a loop-carried fp32
// tensor that tl.dot adds into.
// CHECK:      @triton.jit
// CHECK-NEXT: def rmsnorm_linear_k0(in0, in1, out0):
// CHECK:      tl.zeros([16, 64], dtype=tl.float32)
// CHECK:      for it in range(0, 64):
// CHECK:      tl.load(in1 + (it * 64 + tl.arange(0, 64)[:, None]) * 4096 + (pid0 * 64 + tl.arange(0, 64)[None, :]), eviction_policy='evict_first')
// CHECK:      = tl.dot(x{{[0-9]+}}, x{{[0-9]+}}, acc{{[0-9]+}})
// CHECK:      tl.store(out0 + {{.*}}, mask=(tl.arange(0, 16)[:, None] < 2))
// CHECK:      def rmsnorm_linear_k0_fma(in0, in1, out0):
// CHECK:      tl.sum(tl.expand_dims(
// The deferred form adds the product terms in the loop and sums over K after it.
// CHECK:      def rmsnorm_linear_k0_defer(in0, in1, out0):
// CHECK:      [[TERMS:terms[0-9]+]] = tl.zeros([2, 64, 64], dtype=tl.float32)
// CHECK:      for it in range(0, 64):
// CHECK:      [[TERMS]] += tl.expand_dims(
// CHECK-NOT:  for it
// CHECK:      = tl.sum([[TERMS]], axis=1)
// CHECK:      BUFFERS = [
// CHECK:      LAUNCHES = [
// CHECK-NEXT: {"kernels": ['rmsnorm_linear_k0', 'rmsnorm_linear_k0_fma', 'rmsnorm_linear_k0_defer'], "grid": [64, 1, 1], "args": ['input0', 'input1', 'output0'], "offsets": [0, 0, 0]},
// CHECK:      def run(*inputs):

// A plain program goes through default-customize first: one kernel per op,
// intermediates between them.
// PLAIN:      def gqa_k0(
// PLAIN:      def gqa_k4(
// PLAIN:      "kind": "intermediate"
