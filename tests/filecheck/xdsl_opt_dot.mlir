// RUN: xdsl-opt -t dot %examples/gqa_flashdecoding.mlir | filecheck %s
// RUN: mirage-opt -t dot %examples/gqa_flashdecoding.mlir | filecheck %s

// The dot target is the same in both drivers. The FlashDecoding µGraph is two
// customized kernels; the first one's outputs feed the second one's inputs.

// CHECK:      label="func @gqa";
// CHECK:      subgraph [[K1:cluster_[0-9]+]] {
// CHECK-NEXT:   label="kernel.customized\ngrid [2, 16, 1]  block [128, 1, 1]  forloop_range 4";
// CHECK:        [[Q:n[0-9]+]] [label="block.input\nimap [1, -1, 0]  fmap -1\n1x1x256x64xf16"];
// CHECK:        [[O1:n[0-9]+]] [label="block.output\nomap [1, 3, 0]\n1x1x256x64xf16"];
// CHECK:        [[O2:n[0-9]+]] [label="block.output\nomap [1, 3, 0]\n1x1x256x1xf16"];
// CHECK:      subgraph [[K2:cluster_[0-9]+]] {
// CHECK-NEXT:   label="kernel.customized\ngrid [2, 4, 1]  block [128, 1, 1]  forloop_range 16";
// CHECK:        [[P:n[0-9]+]] [label="arg 0\n1x2x256x1024xf16", shape=ellipse];
// CHECK:        [[S:n[0-9]+]] [label="arg 1\n1x2x256x16xf16", shape=ellipse];
// CHECK-DAG:  [[O1]] -> [[P]];
// CHECK-DAG:  [[O2]] -> [[S]];
