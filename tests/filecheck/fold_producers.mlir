// RUN: mirage-opt -p fold-producers %s | mirage-opt | filecheck %s

// A decode step's query rotation (one block per head) feeds the attention
// through a reshape that groups its 4 heads 2 per key head. The rotation is
// no kernel: the attention's blocks read the unrotated query, reshaped as the
// rotated one was, through the rotation's windows of the last dim, and cos and
// sin whole, and rotate the rows they read themselves.
// CHECK-LABEL: func.func @decode
// CHECK:       %[[Q:.*]] = kernel.reshape %q : tensor<1x4x1x64xf16> -> tensor<1x2x2x64xf16>
// CHECK-NEXT:  kernel.customized(%kt, %[[Q]], %cos, %sin) grid [2, 1, 1] block [128, 1, 1] forloop 1
// CHECK-NEXT:  ^bb0(%{{.*}}: tensor<1x2x64x16xf16>, %[[A:.*]]: tensor<1x2x2x64xf16>, %[[C:.*]]: tensor<1x1x1x64xf16>, %[[S:.*]]: tensor<1x1x1x64xf16>):
// CHECK-NEXT:    %[[X:.*]] = block.input %[[A]] imap [1, -1, -1] fmap -1 : tensor<1x2x2x64xf16> -> tensor<1x1x2x64xf16>
// CHECK-NEXT:    %[[LO:.*]] = block.input %[[A]] imap [1, -1, -1] fmap -1 window [3, 0, 32] : tensor<1x2x2x64xf16> -> tensor<1x1x2x32xf16>
// CHECK-NEXT:    %[[HI:.*]] = block.input %[[A]] imap [1, -1, -1] fmap -1 window [3, 32, 64] : tensor<1x2x2x64xf16> -> tensor<1x1x2x32xf16>
// CHECK-NEXT:    block.input %[[C]] imap [-1, -1, -1] fmap -1 : tensor<1x1x1x64xf16> -> tensor<1x1x1x64xf16>
// CHECK-NEXT:    block.input %[[S]] imap [-1, -1, -1] fmap -1 : tensor<1x1x1x64xf16> -> tensor<1x1x1x64xf16>
// CHECK:         %[[R:.*]] = block.add %{{.*}}, %{{.*}} : tensor<1x1x2x64xf16>, tensor<1x1x2x64xf16> -> tensor<1x1x2x64xf16>
// CHECK:         block.matmul %[[R]], %{{.*}} : tensor<1x1x2x64xf16>, tensor<1x1x64x16xf16> -> tensor<1x1x2x16xf16>
// CHECK-NOT:   kernel.customized
// CHECK:       func.return
func.func @decode(%q: tensor<1x4x1x64xf16>, %cos: tensor<1x1x1x64xf16>, %sin: tensor<1x1x1x64xf16>, %kt: tensor<1x2x64x16xf16>) -> tensor<1x2x2x16xf16> {
  %rot = kernel.customized(%q, %cos, %sin) grid [4, 1, 1] block [128, 1, 1] forloop 1 : (tensor<1x4x1x64xf16>, tensor<1x1x1x64xf16>, tensor<1x1x1x64xf16>) -> tensor<1x4x1x64xf16> {
  ^bb0(%a: tensor<1x4x1x64xf16>, %c: tensor<1x1x1x64xf16>, %s: tensor<1x1x1x64xf16>):
    %x = block.input %a imap [1, -1, -1] fmap -1 : tensor<1x4x1x64xf16> -> tensor<1x1x1x64xf16>
    %lo = block.input %a imap [1, -1, -1] fmap -1 window [3, 0, 32] : tensor<1x4x1x64xf16> -> tensor<1x1x1x32xf16>
    %hi = block.input %a imap [1, -1, -1] fmap -1 window [3, 32, 64] : tensor<1x4x1x64xf16> -> tensor<1x1x1x32xf16>
    %tc = block.input %c imap [-1, -1, -1] fmap -1 : tensor<1x1x1x64xf16> -> tensor<1x1x1x64xf16>
    %ts = block.input %s imap [-1, -1, -1] fmap -1 : tensor<1x1x1x64xf16> -> tensor<1x1x1x64xf16>
    %xc = block.mul %x, %tc : tensor<1x1x1x64xf16>, tensor<1x1x1x64xf16> -> tensor<1x1x1x64xf16>
    %n = block.neg %hi : tensor<1x1x1x32xf16> -> tensor<1x1x1x32xf16>
    %h = block.concat %n, %lo dim 3 : tensor<1x1x1x32xf16>, tensor<1x1x1x32xf16> -> tensor<1x1x1x64xf16>
    %hs = block.mul %h, %ts : tensor<1x1x1x64xf16>, tensor<1x1x1x64xf16> -> tensor<1x1x1x64xf16>
    %r = block.add %xc, %hs : tensor<1x1x1x64xf16>, tensor<1x1x1x64xf16> -> tensor<1x1x1x64xf16>
    block.output %r omap [1, -1, -1] : tensor<1x1x1x64xf16>
  }
  %g = kernel.reshape %rot : tensor<1x4x1x64xf16> -> tensor<1x2x2x64xf16>
  %o = kernel.customized(%g, %kt) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<1x2x2x64xf16>, tensor<1x2x64x16xf16>) -> tensor<1x2x2x16xf16> {
  ^bb0(%b: tensor<1x2x2x64xf16>, %k: tensor<1x2x64x16xf16>):
    %tq = block.input %b imap [1, -1, -1] fmap -1 : tensor<1x2x2x64xf16> -> tensor<1x1x2x64xf16>
    %tk = block.input %k imap [1, -1, -1] fmap -1 : tensor<1x2x64x16xf16> -> tensor<1x1x64x16xf16>
    %sc = block.matmul %tq, %tk : tensor<1x1x2x64xf16>, tensor<1x1x64x16xf16> -> tensor<1x1x2x16xf16>
    block.output %sc omap [1, -1, -1] : tensor<1x1x2x16xf16>
  }
  func.return %o : tensor<1x2x2x16xf16>
}
