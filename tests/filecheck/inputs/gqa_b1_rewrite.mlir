builtin.module {
  pdl.pattern @gqa_pattern : benefit(1) {
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
    %10 = pdl.operation "kernel.exp" (%8 : !pdl.value) -> (%9 : !pdl.type)
    %11 = pdl.result 0 of %10
    %12 = pdl.attribute = 3 : i64
    %13 = pdl.type
    %14 = pdl.operation "kernel.reduce_sum" (%11 : !pdl.value) {"dim" = %12} -> (%13 : !pdl.type)
    %15 = pdl.result 0 of %14
    %16 = pdl.type
    %17 = pdl.operation "kernel.div" (%11, %15 : !pdl.value, !pdl.value) -> (%16 : !pdl.type)
    %18 = pdl.result 0 of %17
    %19 = pdl.type
    %20 = pdl.operation "kernel.matmul" (%18, %5 : !pdl.value, !pdl.value) -> (%19 : !pdl.type)
    %21 = pdl.result 0 of %20
    %22 = pdl.attribute = "gqa"
    pdl.rewrite %20 with "mirage.instantiate"(%22, %1, %3, %5 : !pdl.attribute, !pdl.value, !pdl.value, !pdl.value)
  }
  func.func @gqa(%23: tensor<1x2x32x64xf16>, %24: tensor<1x2x64x512xf16>, %25: tensor<1x2x512x64xf16>) -> tensor<1x2x32x64xf16> {
    %26, %27 = kernel.customized(%23, %24, %25) grid [2, 4, 1] block [128, 1, 1] forloop 2 : (tensor<1x2x32x64xf16>, tensor<1x2x64x512xf16>, tensor<1x2x512x64xf16>) -> (tensor<1x2x32x256xf16>, tensor<1x2x32x4xf16>) {
    ^bb0(%28: tensor<1x2x32x64xf16>, %29: tensor<1x2x64x512xf16>, %30: tensor<1x2x512x64xf16>):
      %31 = block.input %28 imap [1, -1, 0] fmap -1 : tensor<1x2x32x64xf16> -> tensor<1x1x32x64xf16>
      %32 = block.input %29 imap [1, 3, 0] fmap 3 : tensor<1x2x64x512xf16> -> tensor<1x1x64x64xf16>
      %33 = block.input %30 imap [1, 2, 0] fmap 2 : tensor<1x2x512x64xf16> -> tensor<1x1x64x64xf16>
      %34 = block.matmul %31, %32 : tensor<1x1x32x64xf16>, tensor<1x1x64x64xf16> -> tensor<1x1x32x64xf16>
      %35 = block.exp %34 : tensor<1x1x32x64xf16> -> tensor<1x1x32x64xf16>
      %36 = block.matmul %35, %33 : tensor<1x1x32x64xf16>, tensor<1x1x64x64xf16> -> tensor<1x1x32x64xf16>
      %37 = block.forloop_accum %36 reduce "none" : tensor<1x1x32x64xf16> -> tensor<1x1x32x64xf16>
      %38 = block.reduce_sum %35 dim 3 : tensor<1x1x32x64xf16> -> tensor<1x1x32x1xf16>
      %39 = block.forloop_accum %38 reduce "none" : tensor<1x1x32x1xf16> -> tensor<1x1x32x1xf16>
      block.output %37 omap [1, 3, 0] : tensor<1x1x32x64xf16>
      block.output %39 omap [1, 3, 0] : tensor<1x1x32x1xf16>
    }
    %40 = kernel.customized(%26, %27) grid [2, 4, 1] block [128, 1, 1] forloop 4 : (tensor<1x2x32x256xf16>, tensor<1x2x32x4xf16>) -> tensor<1x2x32x64xf16> {
    ^bb0(%41: tensor<1x2x32x256xf16>, %42: tensor<1x2x32x4xf16>):
      %43 = block.input %41 imap [1, 2, 0] fmap 3 : tensor<1x2x32x256xf16> -> tensor<1x1x8x64xf16>
      %44 = block.input %42 imap [1, 2, 0] fmap 3 : tensor<1x2x32x4xf16> -> tensor<1x1x8x1xf16>
      %45 = block.forloop_accum %43 reduce "none" : tensor<1x1x8x64xf16> -> tensor<1x1x8x64xf16>
      %46 = block.forloop_accum %44 reduce "none" : tensor<1x1x8x1xf16> -> tensor<1x1x8x1xf16>
      %47 = block.div %45, %46 : tensor<1x1x8x64xf16>, tensor<1x1x8x1xf16> -> tensor<1x1x8x64xf16>
      block.output %47 omap [1, 2, 0] : tensor<1x1x8x64xf16>
    }
    func.return %40 : tensor<1x2x32x64xf16>
  }
}

