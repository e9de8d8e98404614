func.func @main(%k: tensor<1x2x1x64x16xf16>, %q: tensor<1x8x4x16xf16>, %b: tensor<16xf16>) -> (tensor<1x8x4x64xf16>, tensor<4x3x16xf16>) {
  %e = kernel.broadcast %k : tensor<1x2x1x64x16xf16> -> tensor<1x2x4x64x16xf16>
  %r = kernel.reshape %e : tensor<1x2x4x64x16xf16> -> tensor<1x8x64x16xf16>
  %t = kernel.transpose %r dims 2, 3 : tensor<1x8x64x16xf16> -> tensor<1x8x16x64xf16>
  %s = kernel.matmul %q, %t : tensor<1x8x4x16xf16>, tensor<1x8x16x64xf16> -> tensor<1x8x4x64xf16>
  %x = kernel.exp %b : tensor<16xf16> -> tensor<16xf16>
  %y = kernel.broadcast %x : tensor<16xf16> -> tensor<4x3x16xf16>
  func.return %s, %y : tensor<1x8x4x64xf16>, tensor<4x3x16xf16>
}
