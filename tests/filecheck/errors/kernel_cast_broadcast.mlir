// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Verifier errors of 'kernel.cast' and 'kernel.broadcast'. Each case is one
// chunk and prints exactly one located line; without --verify-diagnostics the
// first one stops the run with exit code 1.
// FIRST: {{\A.*}}errors/kernel_cast_broadcast.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// A cast to an integer type.
// CHECK: {{\A.*}}errors/kernel_cast_broadcast.mlir:[[# @LINE + 2]]:3: error: 'kernel.cast' casts between f16, bf16 and f32 tensors, got tensor<4x8xi32>{{$}}
func.func @f(%x: tensor<4x8xf16>) -> tensor<4x8xi32> {
  %c = kernel.cast %x : tensor<4x8xf16> -> tensor<4x8xi32>
  func.return %c : tensor<4x8xi32>
}

// -----

// A cast that changes the shape.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_cast_broadcast.mlir:[[# @LINE + 2]]:3: error: 'kernel.cast' result shape [8, 4] does not match the expected [4, 8]{{$}}
func.func @f(%x: tensor<4x8xf16>) -> tensor<8x4xf32> {
  %c = kernel.cast %x : tensor<4x8xf16> -> tensor<8x4xf32>
  func.return %c : tensor<8x4xf32>
}

// -----

// A broadcast that stretches a dim of size 3.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_cast_broadcast.mlir:[[# @LINE + 2]]:3: error: 'kernel.broadcast': dimension 1 of size 3 cannot be broadcast to 6; only size-1 dims stretch{{$}}
func.func @f(%x: tensor<2x3xf16>) -> tensor<2x6xf16> {
  %c = kernel.broadcast %x : tensor<2x3xf16> -> tensor<2x6xf16>
  func.return %c : tensor<2x6xf16>
}
