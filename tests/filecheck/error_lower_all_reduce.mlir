// RUN: not mirage-opt -p default-customize,lower-to-gpu %s 2>&1 | filecheck %s
// A shard's program is not one GPU program: lowering it whole would drop the
// sum over the shards, so the lowering refuses it (the runtime lowers each
// stage between the sums).

// CHECK: error: lower-to-gpu: 'kernel.all_reduce' in @f sums over 2 GPUs; a shard's program runs one stage at a time, the sums between (runtime.distributed.ShardRunner)
// CHECK-NOT: Traceback
func.func @f(%x: tensor<2x64xf16>) -> tensor<2x64xf16> {
  %e = kernel.exp %x : tensor<2x64xf16> -> tensor<2x64xf16>
  %s = kernel.all_reduce %e shards 2 : tensor<2x64xf16> -> tensor<2x64xf16>
  func.return %s : tensor<2x64xf16>
}
