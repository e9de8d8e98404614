// RUN: not mirage-opt -p lower-to-gpu %s 2>&1 | filecheck %s
// RUN: not mirage-opt -t triton %s 2>&1 | filecheck %s --check-prefix=TRITON

// A reshape moves nothing, so a function returning a reshape of one of its
// inputs is left with an output no kernel writes.
// CHECK: error: lower-to-gpu: function @view returns a reshape of an input, which moves nothing; every output is written by a kernel
// CHECK-NOT: Traceback
// TRITON: error: @view returns a reshape of an input, which moves nothing; the Triton backend writes every output with a kernel
// TRITON-NOT: Traceback
func.func @view(%x: tensor<8x64xf16>) -> tensor<2x4x64xf16> {
  %r = kernel.reshape %x : tensor<8x64xf16> -> tensor<2x4x64xf16>
  func.return %r : tensor<2x4x64xf16>
}
