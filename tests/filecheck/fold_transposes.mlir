// RUN: mirage-opt -p fold-transposes %s | mirage-opt | filecheck %s

// A transpose read only by a customized kernel is no kernel: the kernel's
// block.input reads the transpose's operand with the two dims swapped; its
// maps (and tile) count the dims of the transposed view, as before.
// CHECK-LABEL: func.func @attention
// CHECK-NOT:   kernel.transpose
// CHECK:       kernel.customized(%{{.*}}, %k, %{{.*}}) grid [2, 1, 1] block [128, 1, 1] forloop 4 : (tensor<1x2x4x64xf16>, tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>) -> tensor<1x2x4x64xf16>
// CHECK-NEXT:  ^bb0(%{{.*}}: tensor<1x2x4x64xf16>, %[[K:.*]]: tensor<1x2x128x64xf16>, %{{.*}}: tensor<1x2x128x64xf16>):
// CHECK:       block.input %[[K]] imap [1, -1, -1] fmap 3 transpose [2, 3] : tensor<1x2x128x64xf16> -> tensor<1x1x64x32xf16>
func.func @attention(%q: tensor<1x2x4x64xf16>, %k: tensor<1x2x128x64xf16>, %v: tensor<1x2x128x64xf16>) -> tensor<1x2x4x64xf16> {
  %kt = kernel.transpose %k dims 2, 3 : tensor<1x2x128x64xf16> -> tensor<1x2x64x128xf16>
  %o = kernel.customized(%q, %kt, %v) grid [2, 1, 1] block [128, 1, 1] forloop 4 : (tensor<1x2x4x64xf16>, tensor<1x2x64x128xf16>, tensor<1x2x128x64xf16>) -> tensor<1x2x4x64xf16> {
  ^bb0(%a: tensor<1x2x4x64xf16>, %b: tensor<1x2x64x128xf16>, %c: tensor<1x2x128x64xf16>):
    %tq = block.input %a imap [1, -1, -1] fmap -1 : tensor<1x2x4x64xf16> -> tensor<1x1x4x64xf16>
    %tk = block.input %b imap [1, -1, -1] fmap 3 : tensor<1x2x64x128xf16> -> tensor<1x1x64x32xf16>
    %tv = block.input %c imap [1, -1, -1] fmap 2 : tensor<1x2x128x64xf16> -> tensor<1x1x32x64xf16>
    %s = block.matmul %tq, %tk : tensor<1x1x4x64xf16>, tensor<1x1x64x32xf16> -> tensor<1x1x4x32xf16>
    %e = block.exp %s : tensor<1x1x4x32xf16> -> tensor<1x1x4x32xf16>
    %p = block.matmul %e, %tv : tensor<1x1x4x32xf16>, tensor<1x1x32x64xf16> -> tensor<1x1x4x64xf16>
    %num = block.forloop_accum %p reduce "none" : tensor<1x1x4x64xf16> -> tensor<1x1x4x64xf16>
    %den = block.forloop_accum %e reduce "sum" : tensor<1x1x4x32xf16> -> tensor<1x1x4x1xf16>
    %r = block.div %num, %den : tensor<1x1x4x64xf16>, tensor<1x1x4x1xf16> -> tensor<1x1x4x64xf16>
    block.output %r omap [1, -1, -1] : tensor<1x1x4x64xf16>
  }
  func.return %o : tensor<1x2x4x64xf16>
}

// A bare kernel op reading the transpose gets its default kernel first, which
// then reads the operand transposed.
// CHECK-LABEL: func.func @scores
// CHECK-NOT:   kernel.transpose
// CHECK:       kernel.customized(%{{.*}}, %k)
// CHECK:       block.input %{{.*}} imap [3, 1, -1] fmap -1 transpose [2, 3] : tensor<1x2x128x64xf16> -> tensor<1x1x64x16xf16>
func.func @scores(%q: tensor<1x2x4x64xf16>, %k: tensor<1x2x128x64xf16>) -> tensor<1x2x4x128xf16> {
  %kt = kernel.transpose %k dims 2, 3 : tensor<1x2x128x64xf16> -> tensor<1x2x64x128xf16>
  %s = kernel.matmul %q, %kt : tensor<1x2x4x64xf16>, tensor<1x2x64x128xf16> -> tensor<1x2x4x128xf16>
  func.return %s : tensor<1x2x4x128xf16>
}

// A reader whose tile would hold 4 elements (8 bytes) of each 64-element row
// of %k: less than a 32-byte sector, so the transpose stays a kernel (the
// slice still gets its default kernel, reading the transpose's result).
// CHECK-LABEL: func.func @narrow
// CHECK:       %[[T:.*]] = kernel.transpose %k dims 2, 3
// CHECK:       kernel.customized(%[[T]])
// CHECK:       block.input %{{.*}} imap [2, 1, -1] fmap -1 window [3, 64, 128] : tensor<1x2x64x128xf16> -> tensor<1x1x4x64xf16>
func.func @narrow(%k: tensor<1x2x128x64xf16>) -> tensor<1x2x64x64xf16> {
  %kt = kernel.transpose %k dims 2, 3 : tensor<1x2x128x64xf16> -> tensor<1x2x64x128xf16>
  %w = kernel.slice %kt dim 3 start 64 end 128 : tensor<1x2x64x128xf16> -> tensor<1x2x64x64xf16>
  func.return %w : tensor<1x2x64x64xf16>
}

// A transpose the function returns, or that a reshape reads, stays a kernel.
// CHECK-LABEL: func.func @kept
// CHECK:       kernel.transpose %{{.*}} dims 0, 1
// CHECK:       kernel.transpose %{{.*}} dims 0, 1
// CHECK-NOT:   transpose [
func.func @kept(%x: tensor<8x16xf16>) -> (tensor<16x8xf16>, tensor<128xf16>) {
  %t = kernel.transpose %x dims 0, 1 : tensor<8x16xf16> -> tensor<16x8xf16>
  %u = kernel.transpose %x dims 0, 1 : tensor<8x16xf16> -> tensor<16x8xf16>
  %r = kernel.reshape %u : tensor<16x8xf16> -> tensor<128xf16>
  %n = kernel.neg %r : tensor<128xf16> -> tensor<128xf16>
  return %t, %n : tensor<16x8xf16>, tensor<128xf16>
}
