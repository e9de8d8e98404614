builtin.module {
  func.func @rmsnorm_linear(%0: tensor<2x4096xf16>, %1: tensor<4096x4096xf16>) -> tensor<2x4096xf16> {
    %2 = kernel.customized(%0, %1) grid [32, 4, 1] block [128, 1, 1] forloop 16 : (tensor<2x4096xf16>, tensor<4096x4096xf16>) -> tensor<8x4096xf16> {
    ^bb0(%3: tensor<2x4096xf16>, %4: tensor<4096x4096xf16>):
      %5 = block.input %3 imap [-1, 1, -1] fmap 1 : tensor<2x4096xf16> -> tensor<2x64xf16>
      %6 = block.input %4 imap [1, 0, -1] fmap 0 : tensor<4096x4096xf16> -> tensor<64x128xf16>
      %7 = block.matmul %5, %6 : tensor<2x64xf16>, tensor<64x128xf16> -> tensor<2x128xf16>
      %8 = block.forloop_accum %7 reduce "none" : tensor<2x128xf16> -> tensor<2x128xf16>
      block.output %8 omap [1, 0, -1] : tensor<2x128xf16>
    }
    %9 = kernel.customized(%2, %0) grid [32, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x4096xf16>, tensor<2x4096xf16>) -> tensor<2x4096xf16> {
    ^bb0(%10: tensor<8x4096xf16>, %11: tensor<2x4096xf16>):
      %12 = block.input %10 imap [1, -1, -1] fmap 0 : tensor<8x4096xf16> -> tensor<2x128xf16>
      %13 = block.input %11 imap [-1, -1, -1] fmap 1 : tensor<2x4096xf16> -> tensor<2x1024xf16>
      %14 = block.forloop_accum %12 reduce "none" : tensor<2x128xf16> -> tensor<2x128xf16>
      %15 = block.forloop_accum %13 reduce "rms" : tensor<2x1024xf16> -> tensor<2x1xf16>
      %16 = block.div %14, %15 : tensor<2x128xf16>, tensor<2x1xf16> -> tensor<2x128xf16>
      block.output %16 omap [1, -1, -1] : tensor<2x128xf16>
    }
    func.return %9 : tensor<2x4096xf16>
  }
}

