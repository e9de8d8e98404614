builtin.module {
  func.func @gated_mlp(%0: tensor<1x4096xf16>, %1: tensor<4096x4096xf16>, %2: tensor<4096x4096xf16>) -> tensor<1x4096xf16> {
    %3 = kernel.customized(%0, %1, %2) grid [64, 1, 1] block [128, 1, 1] forloop 64 : (tensor<1x4096xf16>, tensor<4096x4096xf16>, tensor<4096x4096xf16>) -> tensor<1x4096xf16> {
    ^bb0(%4: tensor<1x4096xf16>, %5: tensor<4096x4096xf16>, %6: tensor<4096x4096xf16>):
      %7 = block.input %4 imap [-1, -1, -1] fmap 1 : tensor<1x4096xf16> -> tensor<1x64xf16>
      %8 = block.input %5 imap [1, -1, -1] fmap 0 : tensor<4096x4096xf16> -> tensor<64x64xf16>
      %9 = block.matmul %7, %8 : tensor<1x64xf16>, tensor<64x64xf16> -> tensor<1x64xf16>
      %10 = block.forloop_accum %9 reduce "none" : tensor<1x64xf16> -> tensor<1x64xf16>
      %11 = block.input %6 imap [1, -1, -1] fmap 0 : tensor<4096x4096xf16> -> tensor<64x64xf16>
      %12 = block.matmul %7, %11 : tensor<1x64xf16>, tensor<64x64xf16> -> tensor<1x64xf16>
      %13 = block.forloop_accum %12 reduce "none" : tensor<1x64xf16> -> tensor<1x64xf16>
      %14 = block.silu %10 : tensor<1x64xf16> -> tensor<1x64xf16>
      %15 = block.mul %14, %13 : tensor<1x64xf16>, tensor<1x64xf16> -> tensor<1x64xf16>
      block.output %15 omap [1, -1, -1] : tensor<1x64xf16>
    }
    func.return %3 : tensor<1x4096xf16>
  }
}

