// RUN: mirage-opt -p lower-to-gpu %s | filecheck %s

// CHECK:      builtin.module attributes {gpu.container_module}
// CHECK:      "gpu.module"() <{sym_name = "kernels"}>
// CHECK:      "gpu.func"() <{function_type = (memref<16x256xf16>, memref<256x512xf16>, memref<16x512xf16>) -> (), kernel}>
// Per-iteration inputs get a ring of three stages; ldmatrix tiles a padded row.
// CHECK-DAG:  gpux.shared_alloc[{{[0-9]+}}] : memref<3x16x64xf16, strided<[1152, 72, 1]>, #gpux<memory_space workgroup>>
// CHECK-DAG:  gpux.shared_alloc[{{[0-9]+}}] : memref<3x64x64xf16, strided<[4608, 72, 1]>, #gpux<memory_space workgroup>>
// The accumulator is fp32.
// CHECK-DAG:  gpux.shared_alloc[{{[0-9]+}}] : memref<16x64xf32, strided<[64, 1]>, #gpux<memory_space workgroup>>
// Prologue: two stages in flight before the loop.
// CHECK:      gpux.cp_async {{.*}}, 16 :
// CHECK:      gpux.cp_async_commit
// CHECK:      scf.for
// CHECK:        scf.if
// CHECK:          gpux.cp_async
// CHECK:        gpux.cp_async_commit
// CHECK-NEXT:   gpux.cp_async_wait 2
// CHECK-NEXT:   "gpu.barrier"()
// CHECK:        gpux.ldmatrix {{.*}} x 4 trans false
// CHECK:        gpux.ldmatrix {{.*}} x 2 trans true
// CHECK:        gpux.mma
// Output: 16-byte copies converting fp32 to f16.
// CHECK:      gpux.copy {{.*}}, 8 : memref<16x512xf16>, memref<16x64xf32
// Host side: destination-passing style and one launch.
// CHECK:      func.func @mm(%{{.*}}: memref<16x256xf16>, %{{.*}}: memref<256x512xf16>, %{{.*}}: memref<16x512xf16> {mirage.output})
// CHECK:      "gpu.launch_func"({{.*}}) <{kernel = @kernels::@mm_k0

func.func @mm(%x: tensor<16x256xf16>, %w: tensor<256x512xf16>) -> tensor<16x512xf16> {
  %o = kernel.customized(%x, %w) grid [8, 1, 1] block [128, 1, 1] forloop 4 : (tensor<16x256xf16>, tensor<256x512xf16>) -> tensor<16x512xf16> {
  ^bb0(%a: tensor<16x256xf16>, %b: tensor<256x512xf16>):
    %ta = block.input %a imap [-1, -1, -1] fmap 1 : tensor<16x256xf16> -> tensor<16x64xf16>
    %tb = block.input %b imap [1, -1, -1] fmap 0 : tensor<256x512xf16> -> tensor<64x64xf16>
    %p = block.matmul %ta, %tb : tensor<16x64xf16>, tensor<64x64xf16> -> tensor<16x64xf16>
    %s = block.forloop_accum %p reduce "none" : tensor<16x64xf16> -> tensor<16x64xf16>
    block.output %s omap [1, -1, -1] : tensor<16x64xf16>
  }
  func.return %o : tensor<16x512xf16>
}
