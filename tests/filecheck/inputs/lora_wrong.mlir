// An off-by-constant mistake: the low-rank term is added twice.
func.func @lora(%x: tensor<1x256xf16>, %w: tensor<256x4096xf16>, %a: tensor<256x16xf16>, %b: tensor<16x4096xf16>) -> tensor<1x4096xf16> {
  %xw = kernel.matmul %x, %w : tensor<1x256xf16>, tensor<256x4096xf16> -> tensor<1x4096xf16>
  %xa = kernel.matmul %x, %a : tensor<1x256xf16>, tensor<256x16xf16> -> tensor<1x16xf16>
  %xab = kernel.matmul %xa, %b : tensor<1x16xf16>, tensor<16x4096xf16> -> tensor<1x4096xf16>
  %d = kernel.add %xab, %xab : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
  %o = kernel.add %xw, %d : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
  func.return %o : tensor<1x4096xf16>
}
