builtin.module {
  func.func @rmsnorm_linear(%0: tensor<2x4096xf16>, %1: tensor<4096x4096xf16>) -> tensor<2x4096xf16> {
    %2 = kernel.customized(%0, %1) grid [64, 1, 1] block [128, 1, 1] forloop 64 : (tensor<2x4096xf16>, tensor<4096x4096xf16>) -> tensor<2x4096xf16> {
    ^bb0(%3: tensor<2x4096xf16>, %4: tensor<4096x4096xf16>):
      %5 = block.input %3 imap [-1, -1, -1] fmap 1 : tensor<2x4096xf16> -> tensor<2x64xf16>
      %6 = block.input %4 imap [1, -1, -1] fmap 0 : tensor<4096x4096xf16> -> tensor<64x64xf16>
      %7 = block.matmul %5, %6 : tensor<2x64xf16>, tensor<64x64xf16> -> tensor<2x64xf16>
      %8 = block.forloop_accum %7 reduce "none" : tensor<2x64xf16> -> tensor<2x64xf16>
      %9 = block.forloop_accum %5 reduce "rms" : tensor<2x64xf16> -> tensor<2x1xf16>
      %10 = block.div %8, %9 : tensor<2x64xf16>, tensor<2x1xf16> -> tensor<2x64xf16>
      block.output %10 omap [1, -1, -1] : tensor<2x64xf16>
    }
    func.return %2 : tensor<2x4096xf16>
  }
}

