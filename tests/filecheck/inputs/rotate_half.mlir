func.func @main(%x: tensor<1x8x4x64xf16>, %c: tensor<8x1x64xf16>, %s: tensor<8x1x64xf16>) -> tensor<1x8x4x64xf16> {
  %lo = kernel.slice %x dim 3 start 0 end 32 : tensor<1x8x4x64xf16> -> tensor<1x8x4x32xf16>
  %hi = kernel.slice %x dim 3 start 32 end 64 : tensor<1x8x4x64xf16> -> tensor<1x8x4x32xf16>
  %n = kernel.neg %hi : tensor<1x8x4x32xf16> -> tensor<1x8x4x32xf16>
  %r = kernel.concat %n, %lo dim 3 : tensor<1x8x4x32xf16>, tensor<1x8x4x32xf16> -> tensor<1x8x4x64xf16>
  %a = kernel.mul %x, %c : tensor<1x8x4x64xf16>, tensor<8x1x64xf16> -> tensor<1x8x4x64xf16>
  %b = kernel.mul %r, %s : tensor<1x8x4x64xf16>, tensor<8x1x64xf16> -> tensor<1x8x4x64xf16>
  %o = kernel.add %a, %b : tensor<1x8x4x64xf16>, tensor<1x8x4x64xf16> -> tensor<1x8x4x64xf16>
  func.return %o : tensor<1x8x4x64xf16>
}
