// RUN: mirage-opt %s | mirage-opt | filecheck %s
// mul_scalar and add_scalar at all three levels and rms_norm's eps print in
// their custom form and parse back with their constants unchanged; an eps of
// 0 is not printed.

// CHECK-LABEL: func.func @scalars(
func.func @scalars(%x: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  // CHECK: kernel.mul_scalar %{{.*}}, 1.250000e-01 : tensor<8x64xf32> -> tensor<8x64xf32>
  %s = kernel.mul_scalar %x, 0.125 : tensor<8x64xf32> -> tensor<8x64xf32>
  // CHECK: kernel.add_scalar %{{.*}}, -1.500000e+00 : tensor<8x64xf32> -> tensor<8x64xf32>
  %a = kernel.add_scalar %s, -1.5 : tensor<8x64xf32> -> tensor<8x64xf32>
  // CHECK: kernel.rms_norm %{{.*}} eps 1.000000e-06 : tensor<8x64xf32> -> tensor<8x64xf32>
  %n = kernel.rms_norm %a eps 1.0e-06 : tensor<8x64xf32> -> tensor<8x64xf32>
  // CHECK: kernel.rms_norm %{{[0-9a-z_]+}} : tensor<8x64xf32> -> tensor<8x64xf32>
  %m = kernel.rms_norm %n : tensor<8x64xf32> -> tensor<8x64xf32>
  %o = kernel.customized(%m) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x64xf32>) -> (tensor<8x64xf32>) {
  ^bb0(%arg: tensor<8x64xf32>):
    %t = block.input %arg imap [0, -1, -1] fmap -1 : tensor<8x64xf32> -> tensor<4x64xf32>
    // CHECK: block.mul_scalar %{{.*}}, 0.10206207261596575 : tensor<4x64xf32> -> tensor<4x64xf32>
    %u = block.mul_scalar %t, 0.10206207261596575 : tensor<4x64xf32> -> tensor<4x64xf32>
    // CHECK: block.rms_norm %{{.*}} eps 1.000000e-02 : tensor<4x64xf32> -> tensor<4x64xf32>
    %v = block.rms_norm %u eps 0.01 : tensor<4x64xf32> -> tensor<4x64xf32>
    %w = block.thread_graph(%v) : (tensor<4x64xf32>) -> (tensor<4x64xf32>) {
    ^bb1(%e: tensor<4x64xf32>):
      // CHECK: thread.mul_scalar %{{.*}}, 3.000000e+00 : tensor<4x64xf32> -> tensor<4x64xf32>
      %p = thread.mul_scalar %e, 3.0 : tensor<4x64xf32> -> tensor<4x64xf32>
      // CHECK: thread.add_scalar %{{.*}}, 2.500000e-01 : tensor<4x64xf32> -> tensor<4x64xf32>
      %q = thread.add_scalar %p, 0.25 : tensor<4x64xf32> -> tensor<4x64xf32>
      thread.yield %q : tensor<4x64xf32>
    }
    // CHECK: block.add_scalar %{{.*}}, 1.000000e+00 : tensor<4x64xf32> -> tensor<4x64xf32>
    %z = block.add_scalar %w, 1.0 : tensor<4x64xf32> -> tensor<4x64xf32>
    block.output %z omap [0, -1, -1] : tensor<4x64xf32>
  }
  func.return %n, %o : tensor<8x64xf32>, tensor<8x64xf32>
}
