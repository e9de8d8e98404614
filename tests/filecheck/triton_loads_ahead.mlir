// RUN: mirage-opt -t triton %s | filecheck %s

// A rolled for-loop without tl.dot loads each iteration's tiles one iteration
// ahead: the first before the loop, the next in each iteration before the
// product uses the one it holds. The weight, a program input that no kernel
// writes, has its first tile loaded before the grid dependency wait (under
// programmatic launch that overlaps the squaring kernel); the squared row,
// which that kernel writes, after it.
// The tl.dot form leaves its loads to Triton's pipeliner.
// CHECK:      def proj_k1(in0, in1, out0):
// CHECK-NOT:      iteration 0
// CHECK:          for it in range(0, 4):
// CHECK-NEXT:         tl.load(in0 + {{.*}}(it * 1024 + {{.*}})  # in0 imap
// CHECK:      def proj_k1_fma(in0, in1, out0):
// CHECK:          gdc_launch_dependents()
// CHECK:          [[W:a[0-9]+]] = tl.load(in1 + {{.*}}, iteration 0
// CHECK-NEXT:     if GRID_DEPENDENCY:
// CHECK-NEXT:         gdc_wait()
// CHECK-NEXT:     [[X:a[0-9]+]] = tl.load(in0 + {{.*}}, iteration 0
// CHECK:          for it in range(0, 4):
// CHECK-NEXT:         [[XI:x[0-9]+]] = [[X]]
// CHECK-NEXT:         [[X]] = tl.load(in0 + {{.*}}((it + 1) * 1024 + {{.*}}, mask=(it + 1 < 4), other=0.0)  # the next iteration's
// CHECK-NEXT:         [[WI:x[0-9]+]] = tl.permute([[W]], (1, 0))
// CHECK-NEXT:         [[W]] = tl.load(in1 + {{.*}}, mask=(it + 1 < 4), other=0.0, eviction_policy='evict_first')  # the next iteration's
// CHECK-NEXT:         tl.sum(tl.permute([[WI]].to(tl.float32), (1, 0)) * [[XI]].to(tl.float32), axis=1)

builtin.module {
  func.func @proj(%0: tensor<1x4096xf16>, %1: tensor<1024x4096xf16>) -> tensor<1x1024xf16> {
    %2 = kernel.mul %0, %0 : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
    %3 = kernel.transpose %1 dims 0, 1 : tensor<1024x4096xf16> -> tensor<4096x1024xf16>
    %4 = kernel.matmul %2, %3 : tensor<1x4096xf16>, tensor<4096x1024xf16> -> tensor<1x1024xf16>
    func.return %4 : tensor<1x1024xf16>
  }
}
