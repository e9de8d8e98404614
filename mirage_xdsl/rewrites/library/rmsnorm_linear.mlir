builtin.module {
  pdl.pattern @rmsnorm_linear_pattern : benefit(1) {
    %0 = pdl.type
    %1 = pdl.operand : %0
    %2 = pdl.type
    %3 = pdl.operand : %2
    %4 = pdl.type
    %5 = pdl.operation "kernel.rms_norm" (%1 : !pdl.value) -> (%4 : !pdl.type)
    %6 = pdl.result 0 of %5
    %7 = pdl.type
    %8 = pdl.operation "kernel.matmul" (%6, %3 : !pdl.value, !pdl.value) -> (%7 : !pdl.type)
    %9 = pdl.result 0 of %8
    %10 = pdl.attribute = "rmsnorm_linear"
    pdl.rewrite %8 with "mirage.instantiate"(%10, %1, %3 : !pdl.attribute, !pdl.value, !pdl.value)
  }
  func.func @rmsnorm_linear(%11: tensor<2x4096xf16>, %12: tensor<4096x4096xf16>) -> tensor<2x4096xf16> {
    %13 = kernel.customized(%11, %12) grid [64, 1, 1] block [128, 1, 1] forloop 64 : (tensor<2x4096xf16>, tensor<4096x4096xf16>) -> tensor<2x4096xf16> {
    ^bb0(%14: tensor<2x4096xf16>, %15: tensor<4096x4096xf16>):
      %16 = block.input %14 imap [-1, -1, -1] fmap 1 : tensor<2x4096xf16> -> tensor<2x64xf16>
      %17 = block.input %15 imap [1, -1, -1] fmap 0 : tensor<4096x4096xf16> -> tensor<64x64xf16>
      %18 = block.matmul %16, %17 : tensor<2x64xf16>, tensor<64x64xf16> -> tensor<2x64xf16>
      %19 = block.forloop_accum %18 reduce "none" : tensor<2x64xf16> -> tensor<2x64xf16>
      %20 = block.forloop_accum %16 reduce "rms" : tensor<2x64xf16> -> tensor<2x1xf16>
      %21 = block.div %19, %20 : tensor<2x64xf16>, tensor<2x1xf16> -> tensor<2x64xf16>
      block.output %21 omap [1, -1, -1] : tensor<2x64xf16>
    }
    func.return %13 : tensor<2x4096xf16>
  }
}

