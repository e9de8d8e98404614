// RUN: mirage-opt -p default-customize %s | filecheck %s

// Matmul: the grid tiles the output, the for-loop walks K, fp32 accumulation.
// CHECK-LABEL: func.func @mlp
// CHECK:      kernel.customized(%{{.*}}, %{{.*}}) grid [{{[0-9]+}}, 1, 1] block [128, 1, 1] forloop 4
// CHECK:        block.input %{{.*}} imap [-1, -1, -1] fmap 1 : tensor<8x256xf16> -> tensor<8x64xf16>
// CHECK-NEXT:   block.input %{{.*}} imap [1, -1, -1] fmap 0 : tensor<256x512xf16> -> tensor<64x{{[0-9]+}}xf16>
// CHECK-NEXT:   block.matmul
// CHECK-NEXT:   block.forloop_accum %{{.*}} reduce "none"
// CHECK-NEXT:   block.output %{{.*}} omap [1, -1, -1]
// Element-wise: the grid tiles the output.
// CHECK:      kernel.customized(%{{.*}}) grid
// CHECK:        block.exp
// reduce_sum of short rows: one block reduction.
// CHECK:      kernel.customized(%{{.*}}) grid [8, 1, 1] block [128, 1, 1] forloop 1
// CHECK:        block.reduce_sum %{{.*}} dim 1 : tensor<1x512xf16> -> tensor<1x1xf16>
// rms_norm: whole rows per block.
// CHECK:      kernel.customized
// CHECK:        block.input %{{.*}} fmap -1 : tensor<8x512xf16> -> tensor<{{[0-9]+}}x512xf16>
// CHECK-NEXT:   block.rms_norm
// CHECK-NOT:  kernel.matmul
// CHECK-NOT:  kernel.exp

// reduce_sum of long rows: the for-loop walks them with a summing accumulator.
// CHECK-LABEL: func.func @long_rows
// CHECK:      kernel.customized(%{{.*}}) grid [4, 1, 1] block [128, 1, 1] forloop 8
// CHECK:        block.input %{{.*}} imap [0, -1, -1] fmap 1 : tensor<4x8192xf16> -> tensor<1x1024xf16>
// CHECK-NEXT:   block.forloop_accum %{{.*}} reduce "sum" : tensor<1x1024xf16> -> tensor<1x1xf16>

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
