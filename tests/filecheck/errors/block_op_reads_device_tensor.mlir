// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A block op reading a device tensor without block.input: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/block_op_reads_device_tensor.mlir:10:5: error: 'block.add' uses operand #1 from outside its 'kernel.customized', which sees only its own arguments{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %s = block.add %t, %x : tensor<8x32xf16>, tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %s omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
