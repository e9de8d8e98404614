builtin.module {
  func.func @gated_mlp(%0: tensor<1x4096xf16>, %1: tensor<4096x4096xf16>, %2: tensor<4096x4096xf16>) -> tensor<1x4096xf16> {
    %3, %4 = kernel.customized(%0, %1, %2) grid [32, 4, 1] block [128, 1, 1] forloop 16 : (tensor<1x4096xf16>, tensor<4096x4096xf16>, tensor<4096x4096xf16>) -> (tensor<4x4096xf16>, tensor<4x4096xf16>) {
    ^bb0(%5: tensor<1x4096xf16>, %6: tensor<4096x4096xf16>, %7: tensor<4096x4096xf16>):
      %8 = block.input %5 imap [-1, 1, -1] fmap 1 : tensor<1x4096xf16> -> tensor<1x64xf16>
      %9 = block.input %6 imap [1, 0, -1] fmap 0 : tensor<4096x4096xf16> -> tensor<64x128xf16>
      %10 = block.matmul %8, %9 : tensor<1x64xf16>, tensor<64x128xf16> -> tensor<1x128xf16>
      %11 = block.forloop_accum %10 reduce "none" : tensor<1x128xf16> -> tensor<1x128xf16>
      block.output %11 omap [1, 0, -1] : tensor<1x128xf16>
      %12 = block.input %7 imap [1, 0, -1] fmap 0 : tensor<4096x4096xf16> -> tensor<64x128xf16>
      %13 = block.matmul %8, %12 : tensor<1x64xf16>, tensor<64x128xf16> -> tensor<1x128xf16>
      %14 = block.forloop_accum %13 reduce "none" : tensor<1x128xf16> -> tensor<1x128xf16>
      block.output %14 omap [1, 0, -1] : tensor<1x128xf16>
    }
    %15 = kernel.customized(%3, %4) grid [32, 1, 1] block [128, 1, 1] forloop 4 : (tensor<4x4096xf16>, tensor<4x4096xf16>) -> tensor<1x4096xf16> {
    ^bb0(%16: tensor<4x4096xf16>, %17: tensor<4x4096xf16>):
      %18 = block.input %16 imap [1, -1, -1] fmap 0 : tensor<4x4096xf16> -> tensor<1x128xf16>
      %19 = block.forloop_accum %18 reduce "none" : tensor<1x128xf16> -> tensor<1x128xf16>
      %20 = block.input %17 imap [1, -1, -1] fmap 0 : tensor<4x4096xf16> -> tensor<1x128xf16>
      %21 = block.forloop_accum %20 reduce "none" : tensor<1x128xf16> -> tensor<1x128xf16>
      %22 = block.silu %19 : tensor<1x128xf16> -> tensor<1x128xf16>
      %23 = block.mul %22, %21 : tensor<1x128xf16>, tensor<1x128xf16> -> tensor<1x128xf16>
      block.output %23 omap [1, -1, -1] : tensor<1x128xf16>
    }
    func.return %15 : tensor<1x4096xf16>
  }
}

