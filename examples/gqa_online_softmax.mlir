builtin.module {
  func.func @gqa(%0: tensor<1x2x256x64xf16>, %1: tensor<1x2x64x4096xf16>, %2: tensor<1x2x4096x64xf16>) -> tensor<1x2x256x64xf16> {
    %3 = kernel.customized(%0, %1, %2) grid [2, 4, 1] block [128, 1, 1] forloop 16 : (tensor<1x2x256x64xf16>, tensor<1x2x64x4096xf16>, tensor<1x2x4096x64xf16>) -> tensor<1x2x256x64xf16> {
    ^bb0(%4: tensor<1x2x256x64xf16>, %5: tensor<1x2x64x4096xf16>, %6: tensor<1x2x4096x64xf16>):
      %7 = block.input %4 imap [1, 2, 0] fmap -1 : tensor<1x2x256x64xf16> -> tensor<1x1x64x64xf16>
      %8 = block.input %5 imap [1, -1, 0] fmap 3 : tensor<1x2x64x4096xf16> -> tensor<1x1x64x256xf16>
      %9 = block.input %6 imap [1, -1, 0] fmap 2 : tensor<1x2x4096x64xf16> -> tensor<1x1x256x64xf16>
      %10 = block.matmul %7, %8 : tensor<1x1x64x64xf16>, tensor<1x1x64x256xf16> -> tensor<1x1x64x256xf16>
      %11 = block.reduce_max %10 dim 3 : tensor<1x1x64x256xf16> -> tensor<1x1x64x1xf16>
      %12 = block.neg %11 : tensor<1x1x64x1xf16> -> tensor<1x1x64x1xf16>
      %13 = block.add %10, %12 : tensor<1x1x64x256xf16>, tensor<1x1x64x1xf16> -> tensor<1x1x64x256xf16>
      %14 = block.exp %13 : tensor<1x1x64x256xf16> -> tensor<1x1x64x256xf16>
      %15 = block.matmul %14, %9 : tensor<1x1x64x256xf16>, tensor<1x1x256x64xf16> -> tensor<1x1x64x64xf16>
      %16 = block.forloop_accum %15 shift %11 reduce "none" : tensor<1x1x64x64xf16>, tensor<1x1x64x1xf16> -> tensor<1x1x64x64xf16>
      %17 = block.forloop_accum %14 shift %11 reduce "sum" : tensor<1x1x64x256xf16>, tensor<1x1x64x1xf16> -> tensor<1x1x64x1xf16>
      %18 = block.div %16, %17 : tensor<1x1x64x64xf16>, tensor<1x1x64x1xf16> -> tensor<1x1x64x64xf16>
      block.output %18 omap [1, 2, 0] : tensor<1x1x64x64xf16>
    }
    func.return %3 : tensor<1x2x256x64xf16>
  }
}

