builtin.module {
  func.func @norm_transformer(%0: tensor<8x4096xf16>, %1: tensor<8x4096xf16>, %2: tensor<8x4096xf16>) -> (tensor<8x4096xf16>, tensor<8x4096xf16>) {
    %3 = kernel.rms_norm %1 : tensor<8x4096xf16> -> tensor<8x4096xf16>
    %4 = kernel.add %3, %0 : tensor<8x4096xf16>, tensor<8x4096xf16> -> tensor<8x4096xf16>
    %5 = kernel.mul %2, %0 : tensor<8x4096xf16>, tensor<8x4096xf16> -> tensor<8x4096xf16>
    %6 = kernel.add %0, %5 : tensor<8x4096xf16>, tensor<8x4096xf16> -> tensor<8x4096xf16>
    %7 = kernel.rms_norm %6 : tensor<8x4096xf16> -> tensor<8x4096xf16>
    func.return %4, %7 : tensor<8x4096xf16>, tensor<8x4096xf16>
  }
}

