builtin.module {
  func.func @lora(%0: tensor<1x256xf16>, %1: tensor<256x4096xf16>, %2: tensor<256x16xf16>, %3: tensor<16x4096xf16>) -> tensor<1x4096xf16> {
    %4 = kernel.customized(%0, %2) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<1x256xf16>, tensor<256x16xf16>) -> tensor<1x16xf16> {
    ^bb0(%5: tensor<1x256xf16>, %6: tensor<256x16xf16>):
      %7 = block.input %5 imap [-1, -1, -1] fmap -1 : tensor<1x256xf16> -> tensor<1x256xf16>
      %8 = block.input %6 imap [-1, -1, -1] fmap -1 : tensor<256x16xf16> -> tensor<256x16xf16>
      %9 = block.matmul %7, %8 : tensor<1x256xf16>, tensor<256x16xf16> -> tensor<1x16xf16>
      block.output %9 omap [-1, -1, -1] : tensor<1x16xf16>
    }
    %10 = kernel.customized(%0, %4, %1, %3) grid [64, 1, 1] block [128, 1, 1] forloop 4 : (tensor<1x256xf16>, tensor<1x16xf16>, tensor<256x4096xf16>, tensor<16x4096xf16>) -> tensor<1x4096xf16> {
    ^bb0(%11: tensor<1x256xf16>, %12: tensor<1x16xf16>, %13: tensor<256x4096xf16>, %14: tensor<16x4096xf16>):
      %15 = block.input %11 imap [-1, -1, -1] fmap 1 : tensor<1x256xf16> -> tensor<1x64xf16>
      %16 = block.input %12 imap [-1, -1, -1] fmap 1 : tensor<1x16xf16> -> tensor<1x4xf16>
      %17 = block.concat %15, %16 dim 1 : tensor<1x64xf16>, tensor<1x4xf16> -> tensor<1x68xf16>
      %18 = block.input %13 imap [1, -1, -1] fmap 0 : tensor<256x4096xf16> -> tensor<64x64xf16>
      %19 = block.input %14 imap [1, -1, -1] fmap 0 : tensor<16x4096xf16> -> tensor<4x64xf16>
      %20 = block.concat %18, %19 dim 0 : tensor<64x64xf16>, tensor<4x64xf16> -> tensor<68x64xf16>
      %21 = block.matmul %17, %20 : tensor<1x68xf16>, tensor<68x64xf16> -> tensor<1x64xf16>
      %22 = block.forloop_accum %21 reduce "none" : tensor<1x64xf16> -> tensor<1x64xf16>
      block.output %22 omap [1, -1, -1] : tensor<1x64xf16>
    }
    func.return %10 : tensor<1x4096xf16>
  }
}

