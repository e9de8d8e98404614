// RUN: mirage-opt -p default-customize %s | filecheck %s

// An RMSNorm making a projection's rows (rms_norm(a) * w, w one weight per
// column) is no kernel of its own: the split-K partial kernel multiplies each
// chunk of a by the chunk of w as it loads them, and the combine kernel
// divides each sum by the row's RMS, sqrt(mean(a^2) + eps), computed there
// from a's whole row (the residual add after it stays the combine's epilogue).
// CHECK-LABEL: func.func @norm_qkv
// CHECK-NOT:  kernel.rms_norm
// CHECK:      kernel.customized(%{{.*}}, %{{.*}}, %{{.*}}) grid [4, 32, 1] block [128, 1, 1] forloop 1
// CHECK:        [[A:%.*]] = block.input %{{.*}} imap [-1, 1, -1] fmap -1 : tensor<1x4096xf16> -> tensor<1x128xf16>
// CHECK-NEXT:   [[W:%.*]] = block.input %{{.*}} imap [-1, 1, -1] fmap -1 : tensor<1x4096xf16> -> tensor<1x128xf16>
// CHECK-NEXT:   [[R:%.*]] = block.mul [[W]], [[A]]
// CHECK-NEXT:   block.input %{{.*}} imap [1, 0, -1] fmap -1 : tensor<4096x256xf16> -> tensor<128x64xf16>
// CHECK-NEXT:   block.matmul [[R]],
// CHECK:      kernel.customized
// CHECK:        block.reduce_sum %{{.*}} dim 0
// CHECK:        block.input %{{.*}} imap [-1, -1, -1] fmap -1 : tensor<1x1x4096xf16> -> tensor<1x1x4096xf16>
// CHECK-NEXT:   block.square
// CHECK-NEXT:   block.reduce_sum %{{.*}} dim 2
// CHECK-NEXT:   block.mul_scalar %{{.*}}, 0.000244140625
// CHECK-NEXT:   block.add_scalar %{{.*}}, 1.000000e-05
// CHECK-NEXT:   block.sqrt
// CHECK-NEXT:   block.div
// CHECK-NEXT:   block.input
// CHECK-NEXT:   block.add
// CHECK-NOT:  kernel.rms_norm
// CHECK-NOT:  kernel.mul

// A norm whose rows are also a result stays a kernel; the projection reads
// its source all the same.
// CHECK-LABEL: func.func @norm_returned
// CHECK:      kernel.customized
// CHECK:        block.rms_norm
// CHECK:      kernel.customized
// CHECK:        block.mul_scalar
// CHECK:        block.matmul
// CHECK:      kernel.customized
// CHECK:        block.sqrt
// CHECK-NOT:    block.add_scalar
// CHECK:        block.div

func.func @norm_qkv(%a: tensor<1x4096xf16>, %w: tensor<4096xf16>, %p: tensor<4096x256xf16>, %r: tensor<1x256xf16>) -> tensor<1x256xf16> {
  %n = kernel.rms_norm %a eps 1.000000e-05 : tensor<1x4096xf16> -> tensor<1x4096xf16>
  %x = kernel.mul %w, %n : tensor<4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
  %y = kernel.matmul %x, %p : tensor<1x4096xf16>, tensor<4096x256xf16> -> tensor<1x256xf16>
  %o = kernel.add %r, %y : tensor<1x256xf16>, tensor<1x256xf16> -> tensor<1x256xf16>
  func.return %o : tensor<1x256xf16>
}

func.func @norm_returned(%a: tensor<1x4096xf16>, %p: tensor<4096x256xf16>) -> (tensor<1x256xf16>, tensor<1x4096xf16>) {
  %n = kernel.rms_norm %a : tensor<1x4096xf16> -> tensor<1x4096xf16>
  %x = kernel.mul_scalar %n, 2.000000e+00 : tensor<1x4096xf16> -> tensor<1x4096xf16>
  %y = kernel.matmul %x, %p : tensor<1x4096xf16>, tensor<4096x256xf16> -> tensor<1x256xf16>
  func.return %y, %n : tensor<1x256xf16>, tensor<1x4096xf16>
}
