builtin.module {
  pdl.pattern @head_mlp_pattern : benefit(1) {
    %0 = pdl.type
    %1 = pdl.operand : %0
    %2 = pdl.type
    %3 = pdl.operand : %2
    %4 = pdl.type
    %5 = pdl.operand : %4
    %6 = pdl.type
    %7 = pdl.operation "kernel.matmul" (%1, %3 : !pdl.value, !pdl.value) -> (%6 : !pdl.type)
    %8 = pdl.result 0 of %7
    %9 = pdl.type
    %10 = pdl.operation "kernel.silu" (%8 : !pdl.value) -> (%9 : !pdl.type)
    %11 = pdl.result 0 of %10
    %12 = pdl.type
    %13 = pdl.operation "kernel.matmul" (%1, %5 : !pdl.value, !pdl.value) -> (%12 : !pdl.type)
    %14 = pdl.result 0 of %13
    %15 = pdl.type
    %16 = pdl.operation "kernel.mul" (%11, %14 : !pdl.value, !pdl.value) -> (%15 : !pdl.type)
    %17 = pdl.result 0 of %16
    %18 = pdl.attribute = "head_mlp"
    pdl.rewrite %16 with "mirage.instantiate"(%18, %1, %3, %5 : !pdl.attribute, !pdl.value, !pdl.value, !pdl.value)
  }
  func.func @head_mlp(%19: tensor<1x2x256x64xf16>, %20: tensor<1x2x64x64xf16>, %21: tensor<1x2x64x64xf16>) -> tensor<1x2x256x64xf16> {
    %22 = kernel.customized(%19, %20, %21) grid [2, 4, 1] block [128, 1, 1] forloop 1 : (tensor<1x2x256x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>) -> tensor<1x2x256x64xf16> {
    ^bb0(%23: tensor<1x2x256x64xf16>, %24: tensor<1x2x64x64xf16>, %25: tensor<1x2x64x64xf16>):
      %26 = block.input %23 imap [1, 2, 0] fmap -1 : tensor<1x2x256x64xf16> -> tensor<1x1x64x64xf16>
      %27 = block.input %24 imap [1, -1, 0] fmap -1 : tensor<1x2x64x64xf16> -> tensor<1x1x64x64xf16>
      %28 = block.input %25 imap [1, -1, 0] fmap -1 : tensor<1x2x64x64xf16> -> tensor<1x1x64x64xf16>
      %29 = block.matmul %26, %27 : tensor<1x1x64x64xf16>, tensor<1x1x64x64xf16> -> tensor<1x1x64x64xf16>
      %30 = block.silu %29 : tensor<1x1x64x64xf16> -> tensor<1x1x64x64xf16>
      %31 = block.matmul %26, %28 : tensor<1x1x64x64xf16>, tensor<1x1x64x64xf16> -> tensor<1x1x64x64xf16>
      %32 = block.mul %30, %31 : tensor<1x1x64x64xf16>, tensor<1x1x64x64xf16> -> tensor<1x1x64x64xf16>
      block.output %32 omap [1, 2, 0] : tensor<1x1x64x64xf16>
    }
    func.return %22 : tensor<1x2x256x64xf16>
  }
}

