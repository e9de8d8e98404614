// RUN: mirage-opt %s | mirage-opt | filecheck %s
// The row maximum at the kernel and block levels: each prints in its custom
// form and parses back, with its dim and dtype kept; a safe softmax subtracts it.

// CHECK-LABEL: func.func @kernel_level(
// CHECK-SAME:  %[[X:.*]]: tensor<4x16xf16>, %[[Y:.*]]: tensor<2x3x5xbf16>
// CHECK:       %[[M:.*]] = kernel.reduce_max %[[X]] dim 1 : tensor<4x16xf16> -> tensor<4x1xf16>
// CHECK-NEXT:  %[[N:.*]] = kernel.neg %[[M]] : tensor<4x1xf16> -> tensor<4x1xf16>
// CHECK-NEXT:  %[[S:.*]] = kernel.add %[[X]], %[[N]] : tensor<4x16xf16>, tensor<4x1xf16> -> tensor<4x16xf16>
// CHECK-NEXT:  %[[C:.*]] = kernel.reduce_max %[[Y]] dim 0 : tensor<2x3x5xbf16> -> tensor<1x3x5xbf16>
// CHECK-NEXT:  func.return %[[S]], %[[C]]
func.func @kernel_level(%x: tensor<4x16xf16>, %y: tensor<2x3x5xbf16>) -> (tensor<4x16xf16>, tensor<1x3x5xbf16>) {
  %m = kernel.reduce_max %x dim 1 : tensor<4x16xf16> -> tensor<4x1xf16>
  %n = kernel.neg %m : tensor<4x1xf16> -> tensor<4x1xf16>
  %s = kernel.add %x, %n : tensor<4x16xf16>, tensor<4x1xf16> -> tensor<4x16xf16>
  %c = kernel.reduce_max %y dim 0 : tensor<2x3x5xbf16> -> tensor<1x3x5xbf16>
  func.return %s, %c : tensor<4x16xf16>, tensor<1x3x5xbf16>
}

// CHECK-LABEL: func.func @block_level
// CHECK:        %[[T:.*]] = block.input %{{.*}} imap [0, -1, -1] fmap -1 : tensor<16x64xf32> -> tensor<4x64xf32>
// CHECK-NEXT:   %[[BM:.*]] = block.reduce_max %[[T]] dim 1 : tensor<4x64xf32> -> tensor<4x1xf32>
// CHECK-NEXT:   block.output %[[BM]] omap [0, -1, -1] : tensor<4x1xf32>
func.func @block_level(%x: tensor<16x64xf32>) -> tensor<16x1xf32> {
  %o = kernel.customized(%x) grid [4, 1, 1] block [128, 1, 1] forloop 1 : (tensor<16x64xf32>) -> tensor<16x1xf32> {
  ^bb0(%in: tensor<16x64xf32>):
    %t = block.input %in imap [0, -1, -1] fmap -1 : tensor<16x64xf32> -> tensor<4x64xf32>
    %m = block.reduce_max %t dim 1 : tensor<4x64xf32> -> tensor<4x1xf32>
    block.output %m omap [0, -1, -1] : tensor<4x1xf32>
  }
  func.return %o : tensor<16x1xf32>
}
