// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A thread op reading a tile that is not an operand of its thread graph: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/thread_op_reads_tile.mlir:13:7: error: 'thread.add' uses operand #1 from outside its 'block.thread_graph', which sees only its own arguments{{$}}
// CHECK-NOT: {{.}}

func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %u = block.exp %t : tensor<8x32xf16> -> tensor<8x32xf16>
    %g = block.thread_graph(%t) : (tensor<8x32xf16>) -> tensor<8x32xf16> {
    ^bb0(%v: tensor<8x32xf16>):
      %e = thread.add %v, %u : tensor<8x32xf16>, tensor<8x32xf16> -> tensor<8x32xf16>
      thread.yield %e : tensor<8x32xf16>
    }
    block.output %g omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}
