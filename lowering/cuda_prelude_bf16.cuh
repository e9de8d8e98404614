
// bf16 tensors are passed as mx_bf16* (the 16 bits of a bfloat16, row-major,
// contiguous). Loads widen to f32 exactly (cvt.f32.bf16, sm_90) and stores round
// f32 to nearest even (cvt.rn.bf16.f32); tensor cores take bf16 fragments with
// the f16 layouts, so ldmatrix is the f16 one (any 16-bit type) and only the
// mma instruction differs.

struct __align__(2) mx_bf16 { unsigned short bits; };
struct __align__(16) mx_bf16x8 { unsigned r[4]; };  // mma A fragment
struct __align__(8) mx_bf16x4 { unsigned r[2]; };   // mma B fragment

__device__ __forceinline__ float mx_bf2f(mx_bf16 h) {
  float f;
  asm("cvt.f32.bf16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
__device__ __forceinline__ mx_bf16 mx_f2bf(float f) {
  mx_bf16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
__device__ __forceinline__ float mx_f32(mx_bf16 h) { return mx_bf2f(h); }
__device__ __forceinline__ void mx_cvt(mx_bf16& d, float s) { d = mx_f2bf(s); }

__device__ __forceinline__ mx_bf16x8 mx_ldmatrix_x4(const mx_bf16* p) {
  const mx_f16x8 f = mx_ldmatrix_x4(reinterpret_cast<const __half*>(p));
  return {{f.r[0], f.r[1], f.r[2], f.r[3]}};
}
__device__ __forceinline__ mx_bf16x8 mx_ldmatrix_x4_trans(const mx_bf16* p) {
  const mx_f16x8 f = mx_ldmatrix_x4_trans(reinterpret_cast<const __half*>(p));
  return {{f.r[0], f.r[1], f.r[2], f.r[3]}};
}
__device__ __forceinline__ mx_bf16x4 mx_ldmatrix_x2(const mx_bf16* p) {
  const mx_f16x4 f = mx_ldmatrix_x2(reinterpret_cast<const __half*>(p));
  return {{f.r[0], f.r[1]}};
}
__device__ __forceinline__ mx_bf16x4 mx_ldmatrix_x2_trans(const mx_bf16* p) {
  const mx_f16x4 f = mx_ldmatrix_x2_trans(reinterpret_cast<const __half*>(p));
  return {{f.r[0], f.r[1]}};
}

__device__ __forceinline__ mx_f32x4 mx_mma(const mx_bf16x8& a, const mx_bf16x4& b, const mx_f32x4& c) {
  mx_f32x4 d;
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
      : "=f"(d.v[0]), "=f"(d.v[1]), "=f"(d.v[2]), "=f"(d.v[3])
      : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]),
        "f"(c.v[0]), "f"(c.v[1]), "f"(c.v[2]), "f"(c.v[3]));
  return d;
}
