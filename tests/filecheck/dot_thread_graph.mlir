// RUN: mirage-opt -t dot %s | filecheck %s

// A customized kernel with a fused thread graph: every level is a cluster,
// partition maps label the block graph's inputs and outputs, and edges
// cross the cluster boundaries through the region arguments.

// CHECK:      digraph "mugraph" {
// CHECK:        subgraph [[FN:cluster_[0-9]+]] {
// CHECK-NEXT:     label="func @gated";
// CHECK:          [[X:n[0-9]+]] [label="input 0\n8x64xf16"
// CHECK:          [[W:n[0-9]+]] [label="input 1\n64x64xf16"
// CHECK:          subgraph [[K:cluster_[0-9]+]] {
// CHECK-NEXT:       label="kernel.customized\ngrid [4, 1, 1]  block [128, 1, 1]  forloop_range 2";
// CHECK:            [[A0:n[0-9]+]] [label="arg 0\n8x64xf16"
// CHECK:            [[A1:n[0-9]+]] [label="arg 1\n64x64xf16"
// CHECK:            [[BX:n[0-9]+]] [label="block.input\nimap [-1, -1, -1]  fmap 1\n8x32xf16"];
// CHECK:            [[BW:n[0-9]+]] [label="block.input\nimap [1, -1, -1]  fmap 0\n32x16xf16"];
// CHECK:            [[MM:n[0-9]+]] [label="block.matmul\n8x16xf16"];
// CHECK:            [[ACC:n[0-9]+]] [label="block.forloop_accum\nreduce none\n8x16xf16"];
// CHECK:            subgraph [[TG:cluster_[0-9]+]] {
// CHECK-NEXT:         label="block.thread_graph";
// CHECK:              [[T0:n[0-9]+]] [label="arg 0\n8x16xf16"
// CHECK:              [[SILU:n[0-9]+]] [label="thread.silu\n8x16xf16"];
// CHECK:              [[EXP:n[0-9]+]] [label="thread.exp\n8x16xf16"];
// CHECK:              [[Y:n[0-9]+]] [label="thread.yield\n8x16xf16"];
// CHECK:            }
// CHECK:            [[OUT:n[0-9]+]] [label="block.output\nomap [1, -1, -1]\n8x16xf16"];
// CHECK:          }
// CHECK:          [[RET:n[0-9]+]] [label="output 0\n8x64xf16"
// CHECK:        }
// CHECK-DAG:    [[X]] -> [[A0]];
// CHECK-DAG:    [[W]] -> [[A1]];
// CHECK-DAG:    [[A0]] -> [[BX]];
// CHECK-DAG:    [[BX]] -> [[MM]];
// CHECK-DAG:    [[BW]] -> [[MM]];
// CHECK-DAG:    [[ACC]] -> [[T0]];
// CHECK-DAG:    [[T0]] -> [[SILU]];
// CHECK-DAG:    [[SILU]] -> [[EXP]];
// CHECK-DAG:    [[EXP]] -> [[Y]];
// CHECK-DAG:    [[Y]] -> [[OUT]];
// CHECK-DAG:    [[OUT]] -> [[RET]];
// CHECK:      }

func.func @gated(%x: tensor<8x64xf16>, %w: tensor<64x64xf16>) -> tensor<8x64xf16> {
  %o = kernel.customized(%x, %w) grid [4, 1, 1] block [128, 1, 1] forloop 2 : (tensor<8x64xf16>, tensor<64x64xf16>) -> tensor<8x64xf16> {
  ^bb0(%a: tensor<8x64xf16>, %b: tensor<64x64xf16>):
    %bx = block.input %a imap [-1, -1, -1] fmap 1 : tensor<8x64xf16> -> tensor<8x32xf16>
    %bw = block.input %b imap [1, -1, -1] fmap 0 : tensor<64x64xf16> -> tensor<32x16xf16>
    %mm = block.matmul %bx, %bw : tensor<8x32xf16>, tensor<32x16xf16> -> tensor<8x16xf16>
    %acc = block.forloop_accum %mm reduce "none" : tensor<8x16xf16> -> tensor<8x16xf16>
    %t = block.thread_graph(%acc) : (tensor<8x16xf16>) -> tensor<8x16xf16> {
    ^bb1(%v: tensor<8x16xf16>):
      %s = thread.silu %v : tensor<8x16xf16> -> tensor<8x16xf16>
      %e = thread.exp %s : tensor<8x16xf16> -> tensor<8x16xf16>
      thread.yield %e : tensor<8x16xf16>
    }
    block.output %t omap [1, -1, -1] : tensor<8x16xf16>
  }
  func.return %o : tensor<8x64xf16>
}
