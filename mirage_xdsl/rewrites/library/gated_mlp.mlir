builtin.module {
  pdl.pattern @gated_mlp_pattern : benefit(1) {
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
    %18 = pdl.attribute = "gated_mlp"
    pdl.rewrite %16 with "mirage.instantiate"(%18, %1, %3, %5 : !pdl.attribute, !pdl.value, !pdl.value, !pdl.value)
  }
  func.func @gated_mlp(%19: tensor<1x4096xf16>, %20: tensor<4096x4096xf16>, %21: tensor<4096x4096xf16>) -> tensor<1x4096xf16> {
    %22 = kernel.customized(%19, %20, %21) grid [64, 1, 1] block [128, 1, 1] forloop 64 : (tensor<1x4096xf16>, tensor<4096x4096xf16>, tensor<4096x4096xf16>) -> tensor<1x4096xf16> {
    ^bb0(%23: tensor<1x4096xf16>, %24: tensor<4096x4096xf16>, %25: tensor<4096x4096xf16>):
      %26 = block.input %23 imap [-1, -1, -1] fmap 1 : tensor<1x4096xf16> -> tensor<1x64xf16>
      %27 = block.input %24 imap [1, -1, -1] fmap 0 : tensor<4096x4096xf16> -> tensor<64x64xf16>
      %28 = block.matmul %26, %27 : tensor<1x64xf16>, tensor<64x64xf16> -> tensor<1x64xf16>
      %29 = block.forloop_accum %28 reduce "none" : tensor<1x64xf16> -> tensor<1x64xf16>
      %30 = block.input %25 imap [1, -1, -1] fmap 0 : tensor<4096x4096xf16> -> tensor<64x64xf16>
      %31 = block.matmul %26, %30 : tensor<1x64xf16>, tensor<64x64xf16> -> tensor<1x64xf16>
      %32 = block.forloop_accum %31 reduce "none" : tensor<1x64xf16> -> tensor<1x64xf16>
      %33 = block.silu %29 : tensor<1x64xf16> -> tensor<1x64xf16>
      %34 = block.mul %33, %32 : tensor<1x64xf16>, tensor<1x64xf16> -> tensor<1x64xf16>
      block.output %34 omap [1, -1, -1] : tensor<1x64xf16>
    }
    func.return %22 : tensor<1x4096xf16>
  }
}

