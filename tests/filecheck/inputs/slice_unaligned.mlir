func.func @main(%x: tensor<4x6x96xf16>, %y: tensor<4x6x40xf16>) -> tensor<4x6x80xf16> {
  %a = kernel.slice %x dim 2 start 3 end 43 : tensor<4x6x96xf16> -> tensor<4x6x40xf16>
  %b = kernel.slice %x dim 1 start 2 end 5 : tensor<4x6x96xf16> -> tensor<4x3x96xf16>
  %c = kernel.slice %b dim 2 start 50 end 90 : tensor<4x3x96xf16> -> tensor<4x3x40xf16>
  %d = kernel.concat %a, %y dim 2 : tensor<4x6x40xf16>, tensor<4x6x40xf16> -> tensor<4x6x80xf16>
  %e = kernel.slice %d dim 1 start 0 end 3 : tensor<4x6x80xf16> -> tensor<4x3x80xf16>
  %f = kernel.concat %c, %c dim 2 : tensor<4x3x40xf16>, tensor<4x3x40xf16> -> tensor<4x3x80xf16>
  %g = kernel.concat %e, %f dim 1 : tensor<4x3x80xf16>, tensor<4x3x80xf16> -> tensor<4x6x80xf16>
  func.return %g : tensor<4x6x80xf16>
}
