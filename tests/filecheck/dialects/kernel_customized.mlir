// RUN: mirage-opt %s | mirage-opt | filecheck %s
// A customized kernel with every block op: input iterators, for-loop
// accumulators of each reduction kind, arithmetic, concat and output savers.

// CHECK-LABEL: func.func @block_ops
// CHECK:      %[[O0:[^ ,]+]], %[[O1:[^ ,]+]], %[[O2:[^ ,]+]], %[[O3:[^ ,]+]], %[[O4:[^ ,]+]] = kernel.customized(%{{.*}}, %{{.*}}) grid [2, 1, 1] block [128, 1, 1] forloop 4
// CHECK-SAME: : (tensor<8x32xf16>, tensor<32x16xf16>) -> (tensor<8x16xf16>, tensor<8x1xf16>, tensor<8x1xf16>, tensor<8x1xf16>, tensor<8x24xf16>)
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: tensor<8x32xf16>, %[[W:.*]]: tensor<32x16xf16>):
// CHECK-NEXT:   %[[BX:.*]] = block.input %[[X]] imap [0, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<4x8xf16>
// CHECK-NEXT:   %[[BW:.*]] = block.input %[[W]] imap [-1, -1, -1] fmap 0 : tensor<32x16xf16> -> tensor<8x16xf16>
// CHECK-NEXT:   %[[MM:.*]] = block.matmul %[[BX]], %[[BW]] : tensor<4x8xf16>, tensor<8x16xf16> -> tensor<4x16xf16>
// CHECK-NEXT:   %[[ACC:.*]] = block.forloop_accum %[[MM]] reduce "none" : tensor<4x16xf16> -> tensor<4x16xf16>
// CHECK-NEXT:   %[[SUM:.*]] = block.forloop_accum %[[BX]] reduce "sum" : tensor<4x8xf16> -> tensor<4x1xf16>
// CHECK-NEXT:   %[[MEAN:.*]] = block.forloop_accum %[[BX]] reduce "mean" : tensor<4x8xf16> -> tensor<4x1xf16>
// CHECK-NEXT:   %[[RMS:.*]] = block.forloop_accum %[[BX]] reduce "rms" : tensor<4x8xf16> -> tensor<4x1xf16>
// CHECK-NEXT:   block.add
// CHECK-NEXT:   block.mul
// CHECK-NEXT:   block.div
// CHECK-NEXT:   block.exp
// CHECK-NEXT:   block.silu
// CHECK-NEXT:   block.sqrt
// CHECK-NEXT:   block.square
// CHECK-NEXT:   block.rms_norm
// CHECK-NEXT:   %[[RED:.*]] = block.reduce_sum %{{.*}} dim 1 : tensor<4x16xf16> -> tensor<4x1xf16>
// CHECK-NEXT:   block.forloop_accum %[[BX]] reduce "none" : tensor<4x8xf16> -> tensor<4x8xf16>
// CHECK-NEXT:   %[[CAT:.*]] = block.concat %[[ACC]], %{{.*}} dim 1 : tensor<4x16xf16>, tensor<4x8xf16> -> tensor<4x24xf16>
// CHECK-NEXT:   block.output %[[ACC]] omap [0, -1, -1] : tensor<4x16xf16>
// CHECK-NEXT:   block.output %[[SUM]] omap [0, -1, -1] : tensor<4x1xf16>
// CHECK-NEXT:   block.output %[[RED]] omap [0, -1, -1] : tensor<4x1xf16>
// CHECK-NEXT:   block.output %[[RMS]] omap [0, 1, -1] : tensor<4x1xf16>
// CHECK-NEXT:   block.output %[[CAT]] omap [0, -1, -1] : tensor<4x24xf16>
// CHECK-NEXT: }
// CHECK-NEXT: func.return %[[O0]], %[[O1]], %[[O2]], %[[O3]], %[[O4]] :
func.func @block_ops(%x: tensor<8x32xf16>, %w: tensor<32x16xf16>) -> (tensor<8x16xf16>, tensor<8x1xf16>, tensor<8x1xf16>, tensor<8x1xf16>, tensor<8x24xf16>) {
  %o:5 = kernel.customized(%x, %w) grid [2, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>, tensor<32x16xf16>) -> (tensor<8x16xf16>, tensor<8x1xf16>, tensor<8x1xf16>, tensor<8x1xf16>, tensor<8x24xf16>) {
  ^bb0(%ax: tensor<8x32xf16>, %aw: tensor<32x16xf16>):
    %bx = block.input %ax imap [0, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<4x8xf16>
    %bw = block.input %aw imap [-1, -1, -1] fmap 0 : tensor<32x16xf16> -> tensor<8x16xf16>
    %mm = block.matmul %bx, %bw : tensor<4x8xf16>, tensor<8x16xf16> -> tensor<4x16xf16>
    %acc = block.forloop_accum %mm reduce "none" : tensor<4x16xf16> -> tensor<4x16xf16>
    %sum = block.forloop_accum %bx reduce "sum" : tensor<4x8xf16> -> tensor<4x1xf16>
    %mean = block.forloop_accum %bx reduce "mean" : tensor<4x8xf16> -> tensor<4x1xf16>
    %rms = block.forloop_accum %bx reduce "rms" : tensor<4x8xf16> -> tensor<4x1xf16>
    %a = block.add %acc, %sum : tensor<4x16xf16>, tensor<4x1xf16> -> tensor<4x16xf16>
    %m = block.mul %a, %mean : tensor<4x16xf16>, tensor<4x1xf16> -> tensor<4x16xf16>
    %d = block.div %m, %rms : tensor<4x16xf16>, tensor<4x1xf16> -> tensor<4x16xf16>
    %e = block.exp %d : tensor<4x16xf16> -> tensor<4x16xf16>
    %s = block.silu %e : tensor<4x16xf16> -> tensor<4x16xf16>
    %q = block.sqrt %s : tensor<4x16xf16> -> tensor<4x16xf16>
    %sq = block.square %q : tensor<4x16xf16> -> tensor<4x16xf16>
    %n = block.rms_norm %sq : tensor<4x16xf16> -> tensor<4x16xf16>
    %r = block.reduce_sum %n dim 1 : tensor<4x16xf16> -> tensor<4x1xf16>
    %i = block.forloop_accum %bx reduce "none" : tensor<4x8xf16> -> tensor<4x8xf16>
    %c = block.concat %acc, %i dim 1 : tensor<4x16xf16>, tensor<4x8xf16> -> tensor<4x24xf16>
    block.output %acc omap [0, -1, -1] : tensor<4x16xf16>
    block.output %sum omap [0, -1, -1] : tensor<4x1xf16>
    block.output %r omap [0, -1, -1] : tensor<4x1xf16>
    block.output %rms omap [0, 1, -1] : tensor<4x1xf16>
    block.output %c omap [0, -1, -1] : tensor<4x24xf16>
  }
  func.return %o#0, %o#1, %o#2, %o#3, %o#4 : tensor<8x16xf16>, tensor<8x1xf16>, tensor<8x1xf16>, tensor<8x1xf16>, tensor<8x24xf16>
}
