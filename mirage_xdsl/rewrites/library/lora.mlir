builtin.module {
  pdl.pattern @lora_pattern : benefit(1) {
    %0 = pdl.type
    %1 = pdl.operand : %0
    %2 = pdl.type
    %3 = pdl.operand : %2
    %4 = pdl.type
    %5 = pdl.operand : %4
    %6 = pdl.type
    %7 = pdl.operand : %6
    %8 = pdl.type
    %9 = pdl.operation "kernel.matmul" (%1, %3 : !pdl.value, !pdl.value) -> (%8 : !pdl.type)
    %10 = pdl.result 0 of %9
    %11 = pdl.type
    %12 = pdl.operation "kernel.matmul" (%1, %5 : !pdl.value, !pdl.value) -> (%11 : !pdl.type)
    %13 = pdl.result 0 of %12
    %14 = pdl.type
    %15 = pdl.operation "kernel.matmul" (%13, %7 : !pdl.value, !pdl.value) -> (%14 : !pdl.type)
    %16 = pdl.result 0 of %15
    %17 = pdl.type
    %18 = pdl.operation "kernel.add" (%10, %16 : !pdl.value, !pdl.value) -> (%17 : !pdl.type)
    %19 = pdl.result 0 of %18
    %20 = pdl.attribute = "lora"
    pdl.rewrite %18 with "mirage.instantiate"(%20, %1, %3, %5, %7 : !pdl.attribute, !pdl.value, !pdl.value, !pdl.value, !pdl.value)
  }
  func.func @lora(%21: tensor<1x256xf16>, %22: tensor<256x4096xf16>, %23: tensor<256x16xf16>, %24: tensor<16x4096xf16>) -> tensor<1x4096xf16> {
    %25 = kernel.customized(%21, %23, %22, %24) grid [64, 1, 1] block [128, 1, 1] forloop 1 : (tensor<1x256xf16>, tensor<256x16xf16>, tensor<256x4096xf16>, tensor<16x4096xf16>) -> tensor<1x4096xf16> {
    ^bb0(%26: tensor<1x256xf16>, %27: tensor<256x16xf16>, %28: tensor<256x4096xf16>, %29: tensor<16x4096xf16>):
      %30 = block.input %26 imap [-1, -1, -1] fmap -1 : tensor<1x256xf16> -> tensor<1x256xf16>
      %31 = block.input %27 imap [-1, -1, -1] fmap -1 : tensor<256x16xf16> -> tensor<256x16xf16>
      %32 = block.input %28 imap [1, -1, -1] fmap -1 : tensor<256x4096xf16> -> tensor<256x64xf16>
      %33 = block.input %29 imap [1, -1, -1] fmap -1 : tensor<16x4096xf16> -> tensor<16x64xf16>
      %34 = block.matmul %30, %31 : tensor<1x256xf16>, tensor<256x16xf16> -> tensor<1x16xf16>
      %35 = block.concat %30, %34 dim 1 : tensor<1x256xf16>, tensor<1x16xf16> -> tensor<1x272xf16>
      %36 = block.concat %32, %33 dim 0 : tensor<256x64xf16>, tensor<16x64xf16> -> tensor<272x64xf16>
      %37 = block.matmul %35, %36 : tensor<1x272xf16>, tensor<272x64xf16> -> tensor<1x64xf16>
      block.output %37 omap [1, -1, -1] : tensor<1x64xf16>
    }
    func.return %25 : tensor<1x4096xf16>
  }
}

