func.func @main(%q: tensor<1x4x1x64xf16>, %c: tensor<1x1x1x64xf16>, %s: tensor<1x1x1x64xf16>, %kt: tensor<1x2x64x16xf16>) -> tensor<1x2x2x16xf16> {
  %lo = kernel.slice %q dim 3 start 0 end 32 : tensor<1x4x1x64xf16> -> tensor<1x4x1x32xf16>
  %hi = kernel.slice %q dim 3 start 32 end 64 : tensor<1x4x1x64xf16> -> tensor<1x4x1x32xf16>
  %n = kernel.neg %hi : tensor<1x4x1x32xf16> -> tensor<1x4x1x32xf16>
  %r = kernel.concat %n, %lo dim 3 : tensor<1x4x1x32xf16>, tensor<1x4x1x32xf16> -> tensor<1x4x1x64xf16>
  %a = kernel.mul %q, %c : tensor<1x4x1x64xf16>, tensor<1x1x1x64xf16> -> tensor<1x4x1x64xf16>
  %b = kernel.mul %r, %s : tensor<1x4x1x64xf16>, tensor<1x1x1x64xf16> -> tensor<1x4x1x64xf16>
  %o = kernel.add %a, %b : tensor<1x4x1x64xf16>, tensor<1x4x1x64xf16> -> tensor<1x4x1x64xf16>
  %g = kernel.reshape %o : tensor<1x4x1x64xf16> -> tensor<1x2x2x64xf16>
  %sc = kernel.matmul %g, %kt : tensor<1x2x2x64xf16>, tensor<1x2x64x16xf16> -> tensor<1x2x2x16xf16>
  %e = kernel.exp %sc : tensor<1x2x2x16xf16> -> tensor<1x2x2x16xf16>
  func.return %e : tensor<1x2x2x16xf16>
}
