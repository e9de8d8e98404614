builtin.module {
  func.func @transformer_layer(%0: tensor<1x2x256x64xf16>, %1: tensor<1x2x64x64xf16>, %2: tensor<1x2x64x4096xf16>, %3: tensor<1x2x4096x64xf16>, %4: tensor<1x2x64x64xf16>, %5: tensor<1x2x64x64xf16>) -> tensor<1x2x256x64xf16> {
    %6 = kernel.rms_norm %0 : tensor<1x2x256x64xf16> -> tensor<1x2x256x64xf16>
    %7 = kernel.matmul %6, %1 : tensor<1x2x256x64xf16>, tensor<1x2x64x64xf16> -> tensor<1x2x256x64xf16>
    %8 = kernel.matmul %7, %2 : tensor<1x2x256x64xf16>, tensor<1x2x64x4096xf16> -> tensor<1x2x256x4096xf16>
    %9 = kernel.exp %8 : tensor<1x2x256x4096xf16> -> tensor<1x2x256x4096xf16>
    %10 = kernel.reduce_sum %9 dim 3 : tensor<1x2x256x4096xf16> -> tensor<1x2x256x1xf16>
    %11 = kernel.div %9, %10 : tensor<1x2x256x4096xf16>, tensor<1x2x256x1xf16> -> tensor<1x2x256x4096xf16>
    %12 = kernel.matmul %11, %3 : tensor<1x2x256x4096xf16>, tensor<1x2x4096x64xf16> -> tensor<1x2x256x64xf16>
    %13 = kernel.add %12, %0 : tensor<1x2x256x64xf16>, tensor<1x2x256x64xf16> -> tensor<1x2x256x64xf16>
    %14 = kernel.rms_norm %13 : tensor<1x2x256x64xf16> -> tensor<1x2x256x64xf16>
    %15 = kernel.matmul %14, %4 : tensor<1x2x256x64xf16>, tensor<1x2x64x64xf16> -> tensor<1x2x256x64xf16>
    %16 = kernel.silu %15 : tensor<1x2x256x64xf16> -> tensor<1x2x256x64xf16>
    %17 = kernel.matmul %14, %5 : tensor<1x2x256x64xf16>, tensor<1x2x64x64xf16> -> tensor<1x2x256x64xf16>
    %18 = kernel.mul %16, %17 : tensor<1x2x256x64xf16>, tensor<1x2x256x64xf16> -> tensor<1x2x256x64xf16>
    %19 = kernel.add %18, %13 : tensor<1x2x256x64xf16>, tensor<1x2x256x64xf16> -> tensor<1x2x256x64xf16>
    func.return %19 : tensor<1x2x256x64xf16>
  }
}

