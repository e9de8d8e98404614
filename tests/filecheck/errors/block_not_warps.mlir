// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A thread block that is not a whole number of warps: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/block_not_warps.mlir:7:3: error: 'kernel.customized' block has 100 threads; it needs a multiple of 32 and at most 1024{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [100, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
