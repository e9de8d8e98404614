// RUN: mirage-opt -t cuda %s | filecheck %s
// RUN: mirage-opt -t cuda %examples/gqa.mlir | filecheck %s --check-prefix=F16

// bf16 tensors are mx_bf16 (16 bits); loads widen with cvt.f32.bf16, stores
// round with cvt.rn.bf16.f32, and matmuls take the tensor-core path with the
// bf16 mma (ldmatrix is the b16 one). The bf16 prelude follows the common one.
// CHECK:       struct __align__(2) __half
// CHECK:       extern __shared__ __align__(128) unsigned char mx_shared[];
// CHECK:       struct __align__(2) mx_bf16 { unsigned short bits; };
// CHECK:       asm("cvt.f32.bf16 %0, %1;"
// CHECK:       asm("cvt.rn.bf16.f32 %0, %1;"
// CHECK:       mx_ldmatrix_x4(reinterpret_cast<const __half*>(p))
// CHECK:       "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "

// rms_norm: one warp per row sums squares in f32, then rounds each result.
// CHECK-LABEL: norm_linear_k0(const mx_bf16* __restrict__ arg0, mx_bf16* __restrict__ arg1)
// CHECK:         mx_cp_async<16>(
// CHECK:         const mx_bf16 [[X:v[0-9]+]] = v{{[0-9]+}}[
// CHECK-NEXT:    const float {{v[0-9]+}} = mx_bf2f([[X]]);
// CHECK:         __shfl_xor_sync(0xffffffffu,
// CHECK:         const mx_bf16 [[Y:v[0-9]+]] = mx_f2bf(
// CHECK-NEXT:    v{{[0-9]+}}[{{.*}}] = [[Y]];
// CHECK:         mx_copy<8>(&arg1[

// The matmul on tensor cores: bf16 fragments, f32 accumulators.
// CHECK-LABEL: norm_linear_k1(const mx_bf16* __restrict__ arg0, const mx_bf16* __restrict__ arg1, mx_bf16* __restrict__ arg2)
// CHECK:         const mx_bf16x8 [[A:v[0-9]+]] = mx_ldmatrix_x4(
// CHECK:         const mx_bf16x4 [[B:v[0-9]+]] = mx_ldmatrix_x2_trans(
// CHECK:         const mx_f32x4 {{v[0-9]+}} = mx_mma([[A]], [[B]], c{{[0-9]+}});
// CHECK:         mx_copy<8>(&arg2[

// exp(Q·K) applied to the fragments and rounded to bf16 on the way out.
// CHECK-LABEL: scores_k0(
// CHECK:         mx_mma(
// CHECK:         const float [[E:v[0-9]+]] = expf(
// CHECK-NEXT:    const mx_bf16 [[R:v[0-9]+]] = mx_f2bf([[E]]);
// CHECK-NEXT:    v{{[0-9]+}}[{{.*}}] = [[R]];

// An f16 program gets no bf16 prelude: its source is as before bf16 existed.
// F16-NOT:     mx_bf

func.func @norm_linear(%x: tensor<32x256xbf16>, %w: tensor<256x128xbf16>) -> tensor<32x128xbf16> {
  %n = kernel.rms_norm %x : tensor<32x256xbf16> -> tensor<32x256xbf16>
  %y = kernel.matmul %n, %w : tensor<32x256xbf16>, tensor<256x128xbf16> -> tensor<32x128xbf16>
  func.return %y : tensor<32x128xbf16>
}

func.func @scores(%q: tensor<64x64xbf16>, %k: tensor<64x256xbf16>) -> tensor<64x256xbf16> {
  %o = kernel.customized(%q, %k) grid [4, 1, 1] block [128, 1, 1] forloop 1 : (tensor<64x64xbf16>, tensor<64x256xbf16>) -> tensor<64x256xbf16> {
  ^bb0(%a: tensor<64x64xbf16>, %b: tensor<64x256xbf16>):
    %ta = block.input %a imap [-1, -1, -1] fmap -1 : tensor<64x64xbf16> -> tensor<64x64xbf16>
    %tb = block.input %b imap [1, -1, -1] fmap -1 : tensor<64x256xbf16> -> tensor<64x64xbf16>
    %s = block.matmul %ta, %tb : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xbf16>
    %e = block.exp %s : tensor<64x64xbf16> -> tensor<64x64xbf16>
    block.output %e omap [1, -1, -1] : tensor<64x64xbf16>
  }
  func.return %o : tensor<64x256xbf16>
}
