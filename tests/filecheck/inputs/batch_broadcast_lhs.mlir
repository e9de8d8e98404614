func.func @main(%x: tensor<16x64xf16>, %p: tensor<2x64x32xf16>) -> tensor<2x16x32xf16> {
  %o = kernel.customized(%x, %p) grid [2, 1, 1] block [128, 1, 1] forloop 2 : (tensor<16x64xf16>, tensor<2x64x32xf16>) -> tensor<2x16x32xf16> {
  ^bb0(%a: tensor<16x64xf16>, %c: tensor<2x64x32xf16>):
    %ta = block.input %a imap [-1, -1, -1] fmap 2 : tensor<16x64xf16> -> tensor<1x16x32xf16>
    %tc = block.input %c imap [2, -1, -1] fmap 1 : tensor<2x64x32xf16> -> tensor<2x32x16xf16>
    %p2 = block.matmul %ta, %tc : tensor<1x16x32xf16>, tensor<2x32x16xf16> -> tensor<2x16x16xf16>
    %acc = block.forloop_accum %p2 reduce "none" : tensor<2x16x16xf16> -> tensor<2x16x16xf16>
    block.output %acc omap [2, -1, -1] : tensor<2x16x16xf16>
  }
  func.return %o : tensor<2x16x32xf16>
}
