// RUN: mirage-opt -p default-customize %S/inputs/safe_softmax.mlir | filecheck %s --check-prefix=PART
// RUN: mirage-opt -t triton %S/inputs/safe_softmax.mlir | filecheck %s --check-prefix=TRITON
// RUN: mirage-opt -p default-customize,fuse-thread-graphs,lower-to-gpu -t cuda %S/inputs/safe_softmax.mlir | filecheck %s --check-prefix=CUDA

// The default partition of a maximum gives each block whole rows: the grid
// tiles the kept dim, no for-loop walks the row.
// PART:      kernel.customized(%{{.*}}) grid [8, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x100xf16>) -> tensor<8x1xf16>
// PART-NEXT: ^{{.*}}(%[[A:.*]]: tensor<8x100xf16>):
// PART-NEXT:   %[[T:.*]] = block.input %[[A]] imap [0, -1, -1] fmap -1 : tensor<8x100xf16> -> tensor<1x100xf16>
// PART-NEXT:   %[[M:.*]] = block.reduce_max %[[T]] dim 1 : tensor<1x100xf16> -> tensor<1x1xf16>
// PART-NEXT:   block.output %[[M]] omap [0, -1, -1] : tensor<1x1xf16>

// Triton: the row of 100 is padded to 128; padded lanes are -inf so they never win.
// TRITON:      def safe_softmax_k0(in0, out0):
// TRITON:      = tl.max(tl.where(tl.arange(0, 128)[None, :] < 100, x{{[0-9]+}}.to(tl.float32), float('-inf')), axis=1, keep_dims=True)  # block.reduce_max

// CUDA C: each warp strides its row from its own first element, then a
// butterfly of shuffles combines the lanes with fmaxf.
// CUDA:      __global__ void __launch_bounds__(128) safe_softmax_k0(
// CUDA:      float [[ACC:c[0-9]+]] = v{{[0-9]+}};
// CUDA-NEXT: for (int [[J:i[0-9]+]] = v{{[0-9]+}}; [[J]] < 100; [[J]] += 32) {
// CUDA:        const float [[NEXT:v[0-9]+]] = fmaxf([[ACC]], v{{[0-9]+}});
// CUDA-NEXT:   [[ACC]] = [[NEXT]];
// CUDA-NEXT: }
// CUDA-NEXT: const float [[S:v[0-9]+]] = __shfl_xor_sync(0xffffffffu, [[ACC]], 16);
// CUDA-NEXT: const float v{{[0-9]+}} = fmaxf([[ACC]], [[S]]);
