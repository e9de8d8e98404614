builtin.module {
  pdl.pattern @qknorm_gqa_pattern : benefit(1) {
    %0 = pdl.type
    %1 = pdl.operand : %0
    %2 = pdl.type
    %3 = pdl.operand : %2
    %4 = pdl.type
    %5 = pdl.operand : %4
    %6 = pdl.type
    %7 = pdl.operation "kernel.rms_norm" (%1 : !pdl.value) -> (%6 : !pdl.type)
    %8 = pdl.result 0 of %7
    %9 = pdl.type
    %10 = pdl.operation "kernel.rms_norm" (%5 : !pdl.value) -> (%9 : !pdl.type)
    %11 = pdl.result 0 of %10
    %12 = pdl.type
    %13 = pdl.operation "kernel.matmul" (%8, %3 : !pdl.value, !pdl.value) -> (%12 : !pdl.type)
    %14 = pdl.result 0 of %13
    %15 = pdl.type
    %16 = pdl.operation "kernel.exp" (%14 : !pdl.value) -> (%15 : !pdl.type)
    %17 = pdl.result 0 of %16
    %18 = pdl.attribute = 3 : i64
    %19 = pdl.type
    %20 = pdl.operation "kernel.reduce_sum" (%17 : !pdl.value) {"dim" = %18} -> (%19 : !pdl.type)
    %21 = pdl.result 0 of %20
    %22 = pdl.type
    %23 = pdl.operation "kernel.div" (%17, %21 : !pdl.value, !pdl.value) -> (%22 : !pdl.type)
    %24 = pdl.result 0 of %23
    %25 = pdl.type
    %26 = pdl.operation "kernel.matmul" (%24, %11 : !pdl.value, !pdl.value) -> (%25 : !pdl.type)
    %27 = pdl.result 0 of %26
    %28 = pdl.attribute = "qknorm_gqa"
    pdl.rewrite %26 with "mirage.instantiate"(%28, %1, %3, %5 : !pdl.attribute, !pdl.value, !pdl.value, !pdl.value)
  }
  func.func @qknorm_gqa(%29: tensor<1x2x256x64xf16>, %30: tensor<1x2x64x4096xf16>, %31: tensor<1x2x4096x64xf16>) -> tensor<1x2x256x64xf16> {
    %32 = kernel.customized(%29, %30, %31) grid [2, 4, 1] block [128, 1, 1] forloop 16 : (tensor<1x2x256x64xf16>, tensor<1x2x64x4096xf16>, tensor<1x2x4096x64xf16>) -> tensor<1x2x256x64xf16> {
    ^bb0(%33: tensor<1x2x256x64xf16>, %34: tensor<1x2x64x4096xf16>, %35: tensor<1x2x4096x64xf16>):
      %36 = block.input %33 imap [1, 2, 0] fmap -1 : tensor<1x2x256x64xf16> -> tensor<1x1x64x64xf16>
      %37 = block.rms_norm %36 : tensor<1x1x64x64xf16> -> tensor<1x1x64x64xf16>
      %38 = block.input %34 imap [1, -1, 0] fmap 3 : tensor<1x2x64x4096xf16> -> tensor<1x1x64x256xf16>
      %39 = block.input %35 imap [1, -1, 0] fmap 2 : tensor<1x2x4096x64xf16> -> tensor<1x1x256x64xf16>
      %40 = block.rms_norm %39 : tensor<1x1x256x64xf16> -> tensor<1x1x256x64xf16>
      %41 = block.matmul %37, %38 : tensor<1x1x64x64xf16>, tensor<1x1x64x256xf16> -> tensor<1x1x64x256xf16>
      %42 = block.exp %41 : tensor<1x1x64x256xf16> -> tensor<1x1x64x256xf16>
      %43 = block.matmul %42, %40 : tensor<1x1x64x256xf16>, tensor<1x1x256x64xf16> -> tensor<1x1x64x64xf16>
      %44 = block.forloop_accum %43 reduce "none" : tensor<1x1x64x64xf16> -> tensor<1x1x64x64xf16>
      %45 = block.reduce_sum %42 dim 3 : tensor<1x1x64x256xf16> -> tensor<1x1x64x1xf16>
      %46 = block.forloop_accum %45 reduce "none" : tensor<1x1x64x1xf16> -> tensor<1x1x64x1xf16>
      %47 = block.div %44, %46 : tensor<1x1x64x64xf16>, tensor<1x1x64x1xf16> -> tensor<1x1x64x64xf16>
      block.output %47 omap [1, 2, 0] : tensor<1x1x64x64xf16>
    }
    func.return %32 : tensor<1x2x256x64xf16>
  }
}

