// RUN: mirage-opt -p default-customize %s | filecheck %s

// A slice is a copy whose block.input reads its window of the source in
// place; a concatenation reads both pieces of its rows and joins them.
// CHECK-LABEL: func.func @rotate_half
// CHECK:      %[[LO:.*]] = kernel.customized(%{{.*}}) grid [4, 1, 1]
// CHECK:        %[[T:.*]] = block.input %{{.*}} imap [1, -1, -1] fmap -1 window [3, 0, 32] : tensor<1x8x4x64xf16> -> tensor<1x2x4x32xf16>
// CHECK-NEXT:   block.output %[[T]] omap [1, -1, -1]
// CHECK:      %[[HI:.*]] = kernel.customized(%{{.*}}) grid [4, 1, 1]
// CHECK:        block.input %{{.*}} window [3, 32, 64]
// CHECK:      kernel.customized(%[[HI]], %[[LO]])
// CHECK:        block.concat %{{.*}}, %{{.*}} dim 3 : tensor<1x4x1x32xf16>, tensor<1x4x1x32xf16> -> tensor<1x4x1x64xf16>
// CHECK-NOT:  kernel.slice
func.func @rotate_half(%x: tensor<1x8x4x64xf16>) -> tensor<1x8x4x64xf16> {
  %lo = kernel.slice %x dim 3 start 0 end 32 : tensor<1x8x4x64xf16> -> tensor<1x8x4x32xf16>
  %hi = kernel.slice %x dim 3 start 32 end 64 : tensor<1x8x4x64xf16> -> tensor<1x8x4x32xf16>
  %r = kernel.concat %hi, %lo dim 3 : tensor<1x8x4x32xf16>, tensor<1x8x4x32xf16> -> tensor<1x8x4x64xf16>
  func.return %r : tensor<1x8x4x64xf16>
}

// A broadcast gives the stretched dim a grid dim of its size: each block
// along it reads the same tile (imap -1) and writes its copy (omap).
// CHECK-LABEL: func.func @repeat_kv
// CHECK:      kernel.customized(%{{.*}}) grid [4, 8, 1]
// CHECK:        %[[K:.*]] = block.input %{{.*}} imap [-1, 3, -1] fmap -1 : tensor<1x2x1x64x16xf16> -> tensor<1x2x1x8x16xf16>
// CHECK-NEXT:   block.output %[[K]] omap [2, 3, -1] : tensor<1x2x1x8x16xf16>
func.func @repeat_kv(%k: tensor<1x2x1x64x16xf16>) -> tensor<1x2x4x64x16xf16> {
  %e = kernel.broadcast %k : tensor<1x2x1x64x16xf16> -> tensor<1x2x4x64x16xf16>
  func.return %e : tensor<1x2x4x64x16xf16>
}

// A cast is a copy whose result holds the other element type.
// CHECK-LABEL: func.func @to_f32
// CHECK:      kernel.customized(%{{.*}}) {{.*}} : (tensor<16x4096xbf16>) -> tensor<16x4096xf32>
// CHECK:        block.output %{{.*}} : tensor<1x256xbf16>
func.func @to_f32(%x: tensor<16x4096xbf16>) -> tensor<16x4096xf32> {
  %c = kernel.cast %x : tensor<16x4096xbf16> -> tensor<16x4096xf32>
  func.return %c : tensor<16x4096xf32>
}

// A lower-rank operand is read as a tile of the result's rank.
// CHECK-LABEL: func.func @norm_weight
// CHECK:        block.input %{{.*}} imap [-1, -1, -1] fmap -1 : tensor<256xf16> -> tensor<1x1x256xf16>
// CHECK:        block.mul %{{.*}}, %{{.*}} : tensor<1x1x256xf16>, tensor<1x1x256xf16> -> tensor<1x1x256xf16>
func.func @norm_weight(%x: tensor<2x16x256xf16>, %w: tensor<256xf16>) -> tensor<2x16x256xf16> {
  %m = kernel.mul %x, %w : tensor<2x16x256xf16>, tensor<256xf16> -> tensor<2x16x256xf16>
  func.return %m : tensor<2x16x256xf16>
}
