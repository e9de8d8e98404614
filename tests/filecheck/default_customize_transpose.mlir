// RUN: mirage-opt -p default-customize %s | filecheck %s

// A transpose becomes a one-op kernel: the grid walks tiles of the swapped
// dims (and of the batch dim), the input split along its own dims and the
// output along the swapped ones; the block swaps its tile. A reshape is no
// kernel and stays as it is.
// CHECK-LABEL: func.func @heads
// CHECK:      %[[H:.*]] = kernel.reshape %{{.*}} : tensor<2x128x512xf16> -> tensor<2x128x8x64xf16>
// CHECK:      kernel.customized(%[[H]]) grid [16, 2, 1] block [128, 1, 1] forloop 1
// CHECK:        %[[T:.*]] = block.input %{{.*}} imap [1, 0, -1] fmap -1 : tensor<2x128x8x64xf16> -> tensor<1x8x8x64xf16>
// CHECK-NEXT:   %[[S:.*]] = block.transpose %[[T]] dims 1, 2 : tensor<1x8x8x64xf16> -> tensor<1x8x8x64xf16>
// CHECK-NEXT:   block.output %[[S]] omap [2, 0, -1] : tensor<1x8x8x64xf16>
// CHECK-NOT:  kernel.transpose

// The last two dims: tiles of 64 x 64, one block per tile.
// CHECK-LABEL: func.func @keys
// CHECK:      kernel.customized(%{{.*}}) grid [4, 2, 1] block [128, 1, 1] forloop 1
// CHECK:        block.input %{{.*}} imap [2, 1, -1] fmap -1 : tensor<1x128x256xf16> -> tensor<1x64x64xf16>
// CHECK-NEXT:   block.transpose %{{.*}} dims 1, 2 : tensor<1x64x64xf16> -> tensor<1x64x64xf16>
// CHECK-NEXT:   block.output %{{.*}} omap [1, 2, -1] : tensor<1x64x64xf16>

func.func @heads(%x: tensor<2x128x512xf16>) -> tensor<2x8x128x64xf16> {
  %h = kernel.reshape %x : tensor<2x128x512xf16> -> tensor<2x128x8x64xf16>
  %t = kernel.transpose %h dims 1, 2 : tensor<2x128x8x64xf16> -> tensor<2x8x128x64xf16>
  func.return %t : tensor<2x8x128x64xf16>
}

func.func @keys(%k: tensor<1x128x256xf16>) -> tensor<1x256x128xf16> {
  %t = kernel.transpose %k dims 1, 2 : tensor<1x128x256xf16> -> tensor<1x256x128xf16>
  func.return %t : tensor<1x256x128xf16>
}
