builtin.module {
  pdl.pattern @norm_projection_pattern : benefit(1) {
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
    %10 = pdl.attribute = "norm_projection"
    pdl.rewrite %8 with "mirage.instantiate"(%10, %1, %3 : !pdl.attribute, !pdl.value, !pdl.value)
  }
  func.func @norm_projection(%11: tensor<1x2x256x64xf16>, %12: tensor<1x2x64x64xf16>) -> tensor<1x2x256x64xf16> {
    %13 = kernel.customized(%11, %12) grid [2, 4, 1] block [128, 1, 1] forloop 1 : (tensor<1x2x256x64xf16>, tensor<1x2x64x64xf16>) -> tensor<1x2x256x64xf16> {
    ^bb0(%14: tensor<1x2x256x64xf16>, %15: tensor<1x2x64x64xf16>):
      %16 = block.input %14 imap [1, 2, 0] fmap -1 : tensor<1x2x256x64xf16> -> tensor<1x1x64x64xf16>
      %17 = block.input %15 imap [1, -1, 0] fmap -1 : tensor<1x2x64x64xf16> -> tensor<1x1x64x64xf16>
      %18 = block.rms_norm %16 : tensor<1x1x64x64xf16> -> tensor<1x1x64x64xf16>
      %19 = block.matmul %18, %17 : tensor<1x1x64x64xf16>, tensor<1x1x64x64xf16> -> tensor<1x1x64x64xf16>
      block.output %19 omap [1, 2, 0] : tensor<1x1x64x64xf16>
    }
    func.return %13 : tensor<1x2x256x64xf16>
  }
}

