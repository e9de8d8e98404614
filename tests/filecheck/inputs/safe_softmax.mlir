// Safe softmax over rows of 100: exp(x - max(x)) / sum(exp(x - max(x))), as
// kernel ops. Input of tests/filecheck/safe_softmax_lowering.mlir.
func.func @safe_softmax(%x: tensor<8x100xf16>) -> tensor<8x100xf16> {
  %m = kernel.reduce_max %x dim 1 : tensor<8x100xf16> -> tensor<8x1xf16>
  %n = kernel.neg %m : tensor<8x1xf16> -> tensor<8x1xf16>
  %s = kernel.add %x, %n : tensor<8x100xf16>, tensor<8x1xf16> -> tensor<8x100xf16>
  %e = kernel.exp %s : tensor<8x100xf16> -> tensor<8x100xf16>
  %t = kernel.reduce_sum %e dim 1 : tensor<8x100xf16> -> tensor<8x1xf16>
  %y = kernel.div %e, %t : tensor<8x100xf16>, tensor<8x1xf16> -> tensor<8x100xf16>
  func.return %y : tensor<8x100xf16>
}
