builtin.module {
  func.func @norm_transformer(%0: tensor<1x4096xf16>, %1: tensor<1x4096xf16>, %2: tensor<1x4096xf16>) -> (tensor<1x4096xf16>, tensor<1x4096xf16>) {
    %3, %4 = kernel.customized(%0, %1, %2) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<1x4096xf16>, tensor<1x4096xf16>, tensor<1x4096xf16>) -> (tensor<1x4096xf16>, tensor<1x4096xf16>) {
    ^bb0(%5: tensor<1x4096xf16>, %6: tensor<1x4096xf16>, %7: tensor<1x4096xf16>):
      %8 = block.input %5 imap [0, -1, -1] fmap -1 : tensor<1x4096xf16> -> tensor<1x4096xf16>
      %9 = block.input %6 imap [0, -1, -1] fmap -1 : tensor<1x4096xf16> -> tensor<1x4096xf16>
      %10 = block.input %7 imap [0, -1, -1] fmap -1 : tensor<1x4096xf16> -> tensor<1x4096xf16>
      %11 = block.rms_norm %9 : tensor<1x4096xf16> -> tensor<1x4096xf16>
      %12 = block.add %11, %8 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
      block.output %12 omap [0, -1, -1] : tensor<1x4096xf16>
      %13 = block.mul %10, %8 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
      %14 = block.add %8, %13 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
      %15 = block.rms_norm %14 : tensor<1x4096xf16> -> tensor<1x4096xf16>
      block.output %15 omap [0, -1, -1] : tensor<1x4096xf16>
    }
    func.return %3, %4 : tensor<1x4096xf16>, tensor<1x4096xf16>
  }
}

