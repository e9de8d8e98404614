// softmax(Q·K)·V as plain kernel ops, exp(s) / sum(exp(s)) (no shift).
func.func @attention(%q: tensor<1x20x16xf16>, %k: tensor<1x16x96xf16>, %v: tensor<1x96x16xf16>) -> tensor<1x20x16xf16> {
  %s = kernel.matmul %q, %k : tensor<1x20x16xf16>, tensor<1x16x96xf16> -> tensor<1x20x96xf16>
  %e = kernel.exp %s : tensor<1x20x96xf16> -> tensor<1x20x96xf16>
  %t = kernel.reduce_sum %e dim 2 : tensor<1x20x96xf16> -> tensor<1x20x1xf16>
  %p = kernel.div %e, %t : tensor<1x20x96xf16>, tensor<1x20x1xf16> -> tensor<1x20x96xf16>
  %o = kernel.matmul %p, %v : tensor<1x20x96xf16>, tensor<1x96x16xf16> -> tensor<1x20x16xf16>
  func.return %o : tensor<1x20x16xf16>
}
