// RUN: mirage-opt -p default-customize %s | filecheck %s

// Matmul of at most 16 rows (split-K form): the grid walks 64-column weight
// strips (a second grid dim would split K, left at 1 where the strips alone
// fill the GPU), the for-loop walks K 128 deep, fp32 accumulation.
// CHECK-LABEL: func.func @mlp
// CHECK:      kernel.customized(%{{.*}}, %{{.*}}) grid [8, 1, 1] block [128, 1, 1] forloop 2
// CHECK:        block.input %{{.*}} imap [-1, 1, -1] fmap 1 : tensor<8x256xf16> -> tensor<8x128xf16>
// CHECK-NEXT:   block.input %{{.*}} imap [1, 0, -1] fmap 0 : tensor<256x512xf16> -> tensor<128x64xf16>
// CHECK-NEXT:   block.matmul
// CHECK-NEXT:   block.forloop_accum %{{.*}} reduce "none"
// An element-wise op that only continues the product is its epilogue.
// CHECK-NEXT:   block.exp
// CHECK-NEXT:   block.output %{{.*}} omap [1, 0, -1]
// reduce_sum of short rows: one block reduction.
// CHECK:      kernel.customized(%{{.*}}) grid [8, 1, 1] block [128, 1, 1] forloop 1
// CHECK:        block.reduce_sum %{{.*}} dim 1 : tensor<1x512xf16> -> tensor<1x1xf16>
// rms_norm: whole rows per block.
// CHECK:      kernel.customized
// CHECK:        block.input %{{.*}} fmap -1 : tensor<8x512xf16> -> tensor<{{[0-9]+}}x512xf16>
// CHECK-NEXT:   block.rms_norm
// CHECK-NOT:  kernel.matmul
// CHECK-NOT:  kernel.exp

// reduce_sum of long rows: the for-loop walks them with a summing accumulator,
// 4096 elements an iteration (a block holding one row loads that much at once).
// CHECK-LABEL: func.func @long_rows
// CHECK:      kernel.customized(%{{.*}}) grid [4, 1, 1] block [128, 1, 1] forloop 2
// CHECK:        block.input %{{.*}} imap [0, -1, -1] fmap 1 : tensor<4x8192xf16> -> tensor<1x4096xf16>
// CHECK-NEXT:   block.forloop_accum %{{.*}} reduce "sum" : tensor<1x4096xf16> -> tensor<1x1xf16>

func.func @mlp(%x: tensor<8x256xf16>, %w: tensor<256x512xf16>) -> (tensor<8x1xf16>, tensor<8x512xf16>) {
  %h = kernel.matmul %x, %w : tensor<8x256xf16>, tensor<256x512xf16> -> tensor<8x512xf16>
  %e = kernel.exp %h : tensor<8x512xf16> -> tensor<8x512xf16>
  %s = kernel.reduce_sum %e dim 1 : tensor<8x512xf16> -> tensor<8x1xf16>
  %n = kernel.rms_norm %e : tensor<8x512xf16> -> tensor<8x512xf16>
  func.return %s, %n : tensor<8x1xf16>, tensor<8x512xf16>
}

func.func @long_rows(%x: tensor<4x8192xf16>) -> tensor<4x1xf16> {
  %s = kernel.reduce_sum %x dim 1 : tensor<4x8192xf16> -> tensor<4x1xf16>
  func.return %s : tensor<4x1xf16>
}
