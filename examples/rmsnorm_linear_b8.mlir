builtin.module {
  func.func @rmsnorm_linear(%0: tensor<16x4096xf16>, %1: tensor<4096x4096xf16>) -> tensor<16x4096xf16> {
    %2 = kernel.rms_norm %0 : tensor<16x4096xf16> -> tensor<16x4096xf16>
    %3 = kernel.matmul %2, %1 : tensor<16x4096xf16>, tensor<4096x4096xf16> -> tensor<16x4096xf16>
    func.return %3 : tensor<16x4096xf16>
  }
}

