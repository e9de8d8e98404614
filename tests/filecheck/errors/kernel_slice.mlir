// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Verifier errors of 'kernel.slice' and of a block.input window. Each case is
// one chunk and prints exactly one located line; without --verify-diagnostics
// the first one stops the run with exit code 1.
// FIRST: {{\A.*}}errors/kernel_slice.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// A slice past the end of its dim.
// CHECK: {{\A.*}}errors/kernel_slice.mlir:[[# @LINE + 2]]:3: error: 'kernel.slice': slice [32, 80) of dim 1 (size 64) is empty or out of range{{$}}
func.func @f(%x: tensor<4x64xf16>) -> tensor<4x48xf16> {
  %s = kernel.slice %x dim 1 start 32 end 80 : tensor<4x64xf16> -> tensor<4x48xf16>
  func.return %s : tensor<4x48xf16>
}

// -----

// A slice whose result type is not the window's.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_slice.mlir:[[# @LINE + 2]]:3: error: 'kernel.slice' result shape [4, 16] does not match the expected [4, 32]{{$}}
func.func @f(%x: tensor<4x64xf16>) -> tensor<4x16xf16> {
  %s = kernel.slice %x dim 1 start 0 end 32 : tensor<4x64xf16> -> tensor<4x16xf16>
  func.return %s : tensor<4x16xf16>
}

// -----

// A block.input window out of range.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_slice.mlir:[[# @LINE + 4]]:5: error: 'block.input': slice [64, 128) of dim 1 (size 96) is empty or out of range{{$}}
func.func @f(%x: tensor<4x96xf16>) -> tensor<4x64xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<4x96xf16>) -> tensor<4x64xf16> {
  ^bb0(%a: tensor<4x96xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 window [1, 64, 128] : tensor<4x96xf16> -> tensor<4x64xf16>
    block.output %t omap [-1, -1, -1] : tensor<4x64xf16>
  }
  func.return %o : tensor<4x64xf16>
}
