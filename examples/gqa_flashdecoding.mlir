builtin.module {
  func.func @gqa(%0: tensor<1x2x256x64xf16>, %1: tensor<1x2x64x4096xf16>, %2: tensor<1x2x4096x64xf16>) -> tensor<1x2x256x64xf16> {
    %3, %4 = kernel.customized(%0, %1, %2) grid [2, 16, 1] block [128, 1, 1] forloop 4 : (tensor<1x2x256x64xf16>, tensor<1x2x64x4096xf16>, tensor<1x2x4096x64xf16>) -> (tensor<1x2x256x1024xf16>, tensor<1x2x256x16xf16>) {
    ^bb0(%5: tensor<1x2x256x64xf16>, %6: tensor<1x2x64x4096xf16>, %7: tensor<1x2x4096x64xf16>):
      %8 = block.input %5 imap [1, -1, 0] fmap -1 : tensor<1x2x256x64xf16> -> tensor<1x1x256x64xf16>
      %9 = block.input %6 imap [1, 3, 0] fmap 3 : tensor<1x2x64x4096xf16> -> tensor<1x1x64x64xf16>
      %10 = block.input %7 imap [1, 2, 0] fmap 2 : tensor<1x2x4096x64xf16> -> tensor<1x1x64x64xf16>
      %11 = block.matmul %8, %9 : tensor<1x1x256x64xf16>, tensor<1x1x64x64xf16> -> tensor<1x1x256x64xf16>
      %12 = block.exp %11 : tensor<1x1x256x64xf16> -> tensor<1x1x256x64xf16>
      %13 = block.matmul %12, %10 : tensor<1x1x256x64xf16>, tensor<1x1x64x64xf16> -> tensor<1x1x256x64xf16>
      %14 = block.forloop_accum %13 reduce "none" : tensor<1x1x256x64xf16> -> tensor<1x1x256x64xf16>
      %15 = block.reduce_sum %12 dim 3 : tensor<1x1x256x64xf16> -> tensor<1x1x256x1xf16>
      %16 = block.forloop_accum %15 reduce "none" : tensor<1x1x256x1xf16> -> tensor<1x1x256x1xf16>
      block.output %14 omap [1, 3, 0] : tensor<1x1x256x64xf16>
      block.output %16 omap [1, 3, 0] : tensor<1x1x256x1xf16>
    }
    %17 = kernel.customized(%3, %4) grid [2, 4, 1] block [128, 1, 1] forloop 16 : (tensor<1x2x256x1024xf16>, tensor<1x2x256x16xf16>) -> tensor<1x2x256x64xf16> {
    ^bb0(%18: tensor<1x2x256x1024xf16>, %19: tensor<1x2x256x16xf16>):
      %20 = block.input %18 imap [1, 2, 0] fmap 3 : tensor<1x2x256x1024xf16> -> tensor<1x1x64x64xf16>
      %21 = block.input %19 imap [1, 2, 0] fmap 3 : tensor<1x2x256x16xf16> -> tensor<1x1x64x1xf16>
      %22 = block.forloop_accum %20 reduce "none" : tensor<1x1x64x64xf16> -> tensor<1x1x64x64xf16>
      %23 = block.forloop_accum %21 reduce "none" : tensor<1x1x64x1xf16> -> tensor<1x1x64x1xf16>
      %24 = block.div %22, %23 : tensor<1x1x64x64xf16>, tensor<1x1x64x1xf16> -> tensor<1x1x64x64xf16>
      block.output %24 omap [1, 2, 0] : tensor<1x1x64x64xf16>
    }
    func.return %17 : tensor<1x2x256x64xf16>
  }
}

