builtin.module {
  func.func @gqa(%0: tensor<1x2x256x64xf16>, %1: tensor<1x2x64x4096xf16>, %2: tensor<1x2x4096x64xf16>) -> tensor<1x2x256x64xf16> {
    %3 = kernel.matmul %0, %1 : tensor<1x2x256x64xf16>, tensor<1x2x64x4096xf16> -> tensor<1x2x256x4096xf16>
    %4 = kernel.exp %3 : tensor<1x2x256x4096xf16> -> tensor<1x2x256x4096xf16>
    %5 = kernel.reduce_sum %4 dim 3 : tensor<1x2x256x4096xf16> -> tensor<1x2x256x1xf16>
    %6 = kernel.div %4, %5 : tensor<1x2x256x4096xf16>, tensor<1x2x256x1xf16> -> tensor<1x2x256x4096xf16>
    %7 = kernel.matmul %6, %2 : tensor<1x2x256x4096xf16>, tensor<1x2x4096x64xf16> -> tensor<1x2x256x64xf16>
    func.return %7 : tensor<1x2x256x64xf16>
  }
}

