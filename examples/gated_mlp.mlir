builtin.module {
  func.func @gated_mlp(%0: tensor<1x4096xf16>, %1: tensor<4096x4096xf16>, %2: tensor<4096x4096xf16>) -> tensor<1x4096xf16> {
    %3 = kernel.matmul %0, %1 : tensor<1x4096xf16>, tensor<4096x4096xf16> -> tensor<1x4096xf16>
    %4 = kernel.silu %3 : tensor<1x4096xf16> -> tensor<1x4096xf16>
    %5 = kernel.matmul %0, %2 : tensor<1x4096xf16>, tensor<4096x4096xf16> -> tensor<1x4096xf16>
    %6 = kernel.mul %4, %5 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
    func.return %6 : tensor<1x4096xf16>
  }
}

