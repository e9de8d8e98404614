// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A kernel op inside a block graph: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/kernel_op_in_block_graph.mlir:10:5: error: 'kernel.exp' cannot be in a block graph; 'kernel.customized' regions hold only block ops{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %e = kernel.exp %t : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %e omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
