builtin.module {
  func.func @lora(%0: tensor<1x256xf16>, %1: tensor<256x4096xf16>, %2: tensor<256x16xf16>, %3: tensor<16x4096xf16>) -> tensor<1x4096xf16> {
    %4 = kernel.customized(%0, %2, %1, %3) grid [64, 1, 1] block [128, 1, 1] forloop 1 : (tensor<1x256xf16>, tensor<256x16xf16>, tensor<256x4096xf16>, tensor<16x4096xf16>) -> tensor<1x4096xf16> {
    ^bb0(%5: tensor<1x256xf16>, %6: tensor<256x16xf16>, %7: tensor<256x4096xf16>, %8: tensor<16x4096xf16>):
      %9 = block.input %5 imap [-1, -1, -1] fmap -1 : tensor<1x256xf16> -> tensor<1x256xf16>
      %10 = block.input %6 imap [-1, -1, -1] fmap -1 : tensor<256x16xf16> -> tensor<256x16xf16>
      %11 = block.input %7 imap [1, -1, -1] fmap -1 : tensor<256x4096xf16> -> tensor<256x64xf16>
      %12 = block.input %8 imap [1, -1, -1] fmap -1 : tensor<16x4096xf16> -> tensor<16x64xf16>
      %13 = block.matmul %9, %10 : tensor<1x256xf16>, tensor<256x16xf16> -> tensor<1x16xf16>
      %14 = block.concat %9, %13 dim 1 : tensor<1x256xf16>, tensor<1x16xf16> -> tensor<1x272xf16>
      %15 = block.concat %11, %12 dim 0 : tensor<256x64xf16>, tensor<16x64xf16> -> tensor<272x64xf16>
      %16 = block.matmul %14, %15 : tensor<1x272xf16>, tensor<272x64xf16> -> tensor<1x64xf16>
      block.output %16 omap [1, -1, -1] : tensor<1x64xf16>
    }
    func.return %4 : tensor<1x4096xf16>
  }
}

