// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A thread-level activation outside a thread graph: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/tanh_outside_thread_graph.mlir:7:3: error: 'thread.tanh' expects parent op 'block.thread_graph'{{$}}
// CHECK-NOT: {{.}}

func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %t = thread.tanh %a : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %t : tensor<4x8xf16>
}
