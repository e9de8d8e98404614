func.func @main(%x: tensor<4x96xbf16>, %w: tensor<96xf32>) -> (tensor<4x96xbf16>, tensor<4x96xf32>) {
  %a = kernel.cast %x : tensor<4x96xbf16> -> tensor<4x96xf32>
  %n = kernel.rms_norm %a eps 1.000000e-06 : tensor<4x96xf32> -> tensor<4x96xf32>
  %m = kernel.mul %n, %w : tensor<4x96xf32>, tensor<96xf32> -> tensor<4x96xf32>
  %b = kernel.cast %m : tensor<4x96xf32> -> tensor<4x96xbf16>
  %h = kernel.cast %b : tensor<4x96xbf16> -> tensor<4x96xf16>
  %e = kernel.exp %h : tensor<4x96xf16> -> tensor<4x96xf16>
  %f = kernel.cast %e : tensor<4x96xf16> -> tensor<4x96xf32>
  func.return %b, %f : tensor<4x96xbf16>, tensor<4x96xf32>
}
