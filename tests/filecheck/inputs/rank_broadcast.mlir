func.func @main(%x: tensor<2x16x64xf16>, %w: tensor<64xf16>, %p: tensor<64x32xf16>) -> tensor<2x16x32xf16> {
  %n = kernel.rms_norm %x : tensor<2x16x64xf16> -> tensor<2x16x64xf16>
  %s = kernel.mul %n, %w : tensor<2x16x64xf16>, tensor<64xf16> -> tensor<2x16x64xf16>
  %m = kernel.matmul %s, %p : tensor<2x16x64xf16>, tensor<64x32xf16> -> tensor<2x16x32xf16>
  func.return %m : tensor<2x16x32xf16>
}
