// RUN: mirage-opt -p lower-to-gpu %s | filecheck %s

// exp(Q·K) is applied to the mma fragments on the way out: no tile for Q·K,
// no separate element-wise pass.
// CHECK-COUNT-3: gpux.shared_alloc
// CHECK-NOT:     gpux.shared_alloc
// CHECK:         gpux.mma
// CHECK:         %[[V:.*]] = vector.extract
// CHECK-NEXT:    %[[E:.*]] = math.exp %[[V]] : f32
// CHECK-NEXT:    %[[H:.*]] = arith.truncf %[[E]] : f32 to f16
// CHECK-NEXT:    memref.store %[[H]]

func.func @scores(%q: tensor<64x64xf16>, %k: tensor<64x256xf16>) -> tensor<64x256xf16> {
  %o = kernel.customized(%q, %k) grid [4, 1, 1] block [128, 1, 1] forloop 1 : (tensor<64x64xf16>, tensor<64x256xf16>) -> tensor<64x256xf16> {
  ^bb0(%a: tensor<64x64xf16>, %b: tensor<64x256xf16>):
    %ta = block.input %a imap [-1, -1, -1] fmap -1 : tensor<64x64xf16> -> tensor<64x64xf16>
    %tb = block.input %b imap [1, -1, -1] fmap -1 : tensor<64x256xf16> -> tensor<64x64xf16>
    %s = block.matmul %ta, %tb : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf16>
    %e = block.exp %s : tensor<64x64xf16> -> tensor<64x64xf16>
    block.output %e omap [1, -1, -1] : tensor<64x64xf16>
  }
  func.return %o : tensor<64x256xf16>
}
