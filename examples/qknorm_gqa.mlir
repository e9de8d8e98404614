builtin.module {
  func.func @qknorm_gqa(%0: tensor<1x2x256x64xf16>, %1: tensor<1x2x64x4096xf16>, %2: tensor<1x2x4096x64xf16>) -> tensor<1x2x256x64xf16> {
    %3 = kernel.rms_norm %0 : tensor<1x2x256x64xf16> -> tensor<1x2x256x64xf16>
    %4 = kernel.rms_norm %2 : tensor<1x2x4096x64xf16> -> tensor<1x2x4096x64xf16>
    %5 = kernel.matmul %3, %1 : tensor<1x2x256x64xf16>, tensor<1x2x64x4096xf16> -> tensor<1x2x256x4096xf16>
    %6 = kernel.exp %5 : tensor<1x2x256x4096xf16> -> tensor<1x2x256x4096xf16>
    %7 = kernel.reduce_sum %6 dim 3 : tensor<1x2x256x4096xf16> -> tensor<1x2x256x1xf16>
    %8 = kernel.div %6, %7 : tensor<1x2x256x4096xf16>, tensor<1x2x256x1xf16> -> tensor<1x2x256x4096xf16>
    %9 = kernel.matmul %8, %4 : tensor<1x2x256x4096xf16>, tensor<1x2x4096x64xf16> -> tensor<1x2x256x64xf16>
    func.return %9 : tensor<1x2x256x64xf16>
  }
}

