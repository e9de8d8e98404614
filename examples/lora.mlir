builtin.module {
  func.func @lora(%0: tensor<1x256xf16>, %1: tensor<256x4096xf16>, %2: tensor<256x16xf16>, %3: tensor<16x4096xf16>) -> tensor<1x4096xf16> {
    %4 = kernel.matmul %0, %1 : tensor<1x256xf16>, tensor<256x4096xf16> -> tensor<1x4096xf16>
    %5 = kernel.matmul %0, %2 : tensor<1x256xf16>, tensor<256x16xf16> -> tensor<1x16xf16>
    %6 = kernel.matmul %5, %3 : tensor<1x16xf16>, tensor<16x4096xf16> -> tensor<1x4096xf16>
    %7 = kernel.add %4, %6 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
    func.return %7 : tensor<1x4096xf16>
  }
}

