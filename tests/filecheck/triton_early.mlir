// RUN: mirage-opt -t triton %s | filecheck %s

// Each op is its own kernel here (the exp and the square are returned, so the
// add's kernel does not compute them itself). The square kernel, second in
// the stream, reads %y through a reshape: the program's own input, which no
// kernel writes.
// So it loads and squares it before the grid dependency wait (under
// programmatic launch that overlaps the exp kernel) and only stores after it.
// CHECK:      def main_k1(in0, out0):
// CHECK:          gdc_launch_dependents()
// CHECK:          [[Y:x[0-9]+]] = tl.load(in0
// CHECK-NEXT:     [[SQ:v[0-9]+]] = [[Y]].to(tl.float32) * [[Y]].to(tl.float32)  # block.square
// CHECK-NEXT:     if GRID_DEPENDENCY:
// CHECK-NEXT:         gdc_wait()
// CHECK-NEXT:     tl.store(out0 + {{.*}}, [[SQ]].to(tl.float16))
// The add kernel reads two kernels' results, so it waits before its loads.
// CHECK:      def main_k2(in0, in1, out0):
// CHECK:          gdc_wait()
// CHECK-NEXT:     tl.load(in0
// CHECK-NEXT:     tl.load(in1
// CHECK-NEXT:     # block.add
// CHECK-NEXT:     tl.store(out0

func.func @main(%x: tensor<8x64xf16>, %y: tensor<2x4x64xf16>) -> (tensor<8x64xf16>, tensor<8x64xf16>, tensor<8x64xf16>) {
  %e = kernel.exp %x : tensor<8x64xf16> -> tensor<8x64xf16>
  %r = kernel.reshape %y : tensor<2x4x64xf16> -> tensor<8x64xf16>
  %q = kernel.square %r : tensor<8x64xf16> -> tensor<8x64xf16>
  %s = kernel.add %q, %e : tensor<8x64xf16>, tensor<8x64xf16> -> tensor<8x64xf16>
  func.return %s, %e, %q : tensor<8x64xf16>, tensor<8x64xf16>, tensor<8x64xf16>
}
