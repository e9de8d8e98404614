// Plain softmax over rows of 100, exp(x) / sum(exp(x)): the reference of
// tests/filecheck/verify_safe_softmax.mlir.
func.func @softmax(%x: tensor<8x100xf16>) -> tensor<8x100xf16> {
  %e = kernel.exp %x : tensor<8x100xf16> -> tensor<8x100xf16>
  %t = kernel.reduce_sum %e dim 1 : tensor<8x100xf16> -> tensor<8x1xf16>
  %y = kernel.div %e, %t : tensor<8x100xf16>, tensor<8x1xf16> -> tensor<8x100xf16>
  func.return %y : tensor<8x100xf16>
}
