// RUN: mirage-opt -t triton %s | filecheck %s

// The transpose kernel permutes its register tile; the padded extents move
// with the dims (20 is held in 32, 12 in 16), so the store's mask is the
// load's, permuted.
// CHECK:      def heads_k0(in0, out0):
// CHECK:      [[X:x[0-9]+]] = tl.load(in0 + {{.*}}, mask=(tl.arange(0, 4)[:, None, None] < 3) & (tl.arange(0, 32)[None, :, None] < 20) & (tl.arange(0, 16)[None, None, :] < 12), other=0.0, eviction_policy='evict_last')
// CHECK-NEXT: [[V:v[0-9]+]] = tl.permute([[X]], (2, 1, 0))  # block.transpose
// It reads only the program's input, so all but the store runs before the
// grid dependency wait.
// CHECK-NEXT: if GRID_DEPENDENCY:
// CHECK-NEXT:     gdc_wait()
// CHECK-NEXT: tl.store(out0 + {{.*}}, [[V]].to(tl.float16), mask=(tl.arange(0, 16)[:, None, None] < 12) & (tl.arange(0, 32)[None, :, None] < 20) & (tl.arange(0, 4)[None, None, :] < 3))
// The reshapes launch nothing: the exp kernel reads the transpose's buffer
// and writes the output's.
// CHECK:      def heads_k1(in0, out0):
// A reshape of the transpose's result is not the program's input: the exp
// kernel waits for the transpose before it loads anything.
// CHECK:      gdc_wait()
// CHECK-NEXT: tl.load(in0
// CHECK-NEXT: tl.exp(
// CHECK-NOT:  @triton.jit
// CHECK:      BUFFERS = [
// CHECK-NEXT: {"name": "input0", "shape": [3, 20, 12], "dtype": "f16", "kind": "input", "index": 0},
// CHECK-NEXT: {"name": "output0", "shape": [12, 60], "dtype": "f16", "kind": "output", "index": 0},
// CHECK-NEXT: {"name": "tmp0", "shape": [12, 20, 3], "dtype": "f16", "kind": "intermediate", "index": -1},
// CHECK-NEXT: ]
// CHECK:      LAUNCHES = [
// CHECK-NEXT: {"kernels": ['heads_k0'], "grid": [1, 1, 1], "args": ['input0', 'tmp0'], "offsets": [0, 0]},
// CHECK-NEXT: {"kernels": ['heads_k1'], "grid": [{{[0-9]+}}, 1, 1], "args": ['tmp0', 'output0'], "offsets": [0, 0]},
// CHECK-NEXT: ]

func.func @heads(%x: tensor<3x20x12xf16>) -> tensor<12x60xf16> {
  %t = kernel.transpose %x dims 0, 2 : tensor<3x20x12xf16> -> tensor<12x20x3xf16>
  %r = kernel.reshape %t : tensor<12x20x3xf16> -> tensor<12x60xf16>
  %e = kernel.exp %r : tensor<12x60xf16> -> tensor<12x60xf16>
  func.return %e : tensor<12x60xf16>
}
