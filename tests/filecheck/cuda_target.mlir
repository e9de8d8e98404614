// RUN: mirage-opt -p default-customize,fuse-thread-graphs,lower-to-gpu -t cuda %examples/gqa.mlir | filecheck %s
// RUN: mirage-opt -t cuda %examples/gqa_flashdecoding.mlir | filecheck %s --check-prefix=FLASH

// CHECK:     struct __align__(2) __half
// CHECK:     extern __shared__ __align__(128) unsigned char mx_shared[];
// CHECK:     extern "C" __global__ void __launch_bounds__(128) gqa_k0(const __half* __restrict__ arg0, const __half* __restrict__ arg1, __half* __restrict__ arg2)
// CHECK:       mx_cp_async<16>(
// CHECK:       mx_ldmatrix_x4(
// CHECK:       mx_mma(
// CHECK:     extern "C" __global__ void __launch_bounds__(128) gqa_k1(
// CHECK:       expf(
// CHECK:     gqa_k4(

// FLASH:     gqa_k0(const __half* __restrict__ arg0, const __half* __restrict__ arg1, const __half* __restrict__ arg2, __half* __restrict__ arg3, __half* __restrict__ arg4)
// FLASH:       __shfl_xor_sync(0xffffffffu,
// FLASH:     gqa_k1(
// FLASH:       mx_copy<8>(
