// Float constants at every level: kernel-level ops (default-customized when
// lowered), a block graph with mul_scalar, add_scalar and rms_norm eps, and a
// thread graph with both scalar ops. Used by tests/test_triton.py and
// tests/test_lowering.py to compile and run both backends.
func.func @constants(%x: tensor<8x64xf32>, %y: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %s = kernel.mul_scalar %x, 1.250000e-01 : tensor<8x64xf32> -> tensor<8x64xf32>
  %a = kernel.add_scalar %s, -1.500000e+00 : tensor<8x64xf32> -> tensor<8x64xf32>
  %n = kernel.rms_norm %a eps 1.000000e-06 : tensor<8x64xf32> -> tensor<8x64xf32>
  %o = kernel.customized(%y) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x64xf32>) -> (tensor<8x64xf32>) {
  ^bb0(%arg: tensor<8x64xf32>):
    %t = block.input %arg imap [0, -1, -1] fmap -1 : tensor<8x64xf32> -> tensor<4x64xf32>
    %u = block.mul_scalar %t, 0.10206207261596575 : tensor<4x64xf32> -> tensor<4x64xf32>
    %v = block.rms_norm %u eps 1.000000e-02 : tensor<4x64xf32> -> tensor<4x64xf32>
    %w = block.thread_graph(%v) : (tensor<4x64xf32>) -> (tensor<4x64xf32>) {
    ^bb1(%e: tensor<4x64xf32>):
      %p = thread.mul_scalar %e, 3.000000e+00 : tensor<4x64xf32> -> tensor<4x64xf32>
      %q = thread.add_scalar %p, 2.500000e-01 : tensor<4x64xf32> -> tensor<4x64xf32>
      thread.yield %q : tensor<4x64xf32>
    }
    %z = block.add_scalar %w, 1.000000e+00 : tensor<4x64xf32> -> tensor<4x64xf32>
    block.output %z omap [0, -1, -1] : tensor<4x64xf32>
  }
  func.return %n, %o : tensor<8x64xf32>, tensor<8x64xf32>
}
