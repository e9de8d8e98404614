// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Verifier errors of 'kernel.customized': its launch sizes, results, region
// arguments and shared memory. Each case is one chunk and prints exactly one
// located line; without --verify-diagnostics the first one stops the run with
// exit code 1.
// FIRST: {{\A.*}}errors/kernel_customized.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// A grid without three dims.
// CHECK: {{\A.*}}errors/kernel_customized.mlir:[[# @LINE + 2]]:3: error: 'kernel.customized' grid must be three positive sizes, got [1, 1]{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// A grid with an empty dim.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_customized.mlir:[[# @LINE + 2]]:3: error: 'kernel.customized' grid must be three positive sizes, got [0, 1, 1]{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [0, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// A thread block that is not a whole number of warps.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_customized.mlir:[[# @LINE + 2]]:3: error: 'kernel.customized' block has 100 threads; it needs a multiple of 32 and at most 1024{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [100, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// A thread block over the 1024-thread limit.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_customized.mlir:[[# @LINE + 2]]:3: error: 'kernel.customized' block has 2048 threads; it needs a multiple of 32 and at most 1024{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [64, 32, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// A for-loop range below one.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_customized.mlir:[[# @LINE + 2]]:3: error: 'kernel.customized' forloop range must be >= 1{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 0 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// Customized region arguments that differ from its inputs.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_customized.mlir:[[# @LINE + 2]]:3: error: 'kernel.customized' region arguments must match the input types{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x16xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x16xf16> {
  ^bb0(%a: tensor<8x16xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x16xf16> -> tensor<8x16xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x16xf16>
  }
  func.return %o : tensor<8x16xf16>
}

// -----

// A customized op with more results than output savers.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_customized.mlir:[[# @LINE + 2]]:3: error: 'kernel.customized' has 2 results but its block graph has 1 'block.output' ops{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o, %p = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> (tensor<8x32xf16>, tensor<8x32xf16>) {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// A customized result type that differs from what its output saver stitches.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_customized.mlir:[[# @LINE + 2]]:3: error: 'kernel.customized' result #0 has shape [8, 32] but its 'block.output' stitches [4, 64]{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    block.output %t omap [1, -1, -1] : tensor<4x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// A block graph that needs more than 227 KB of shared memory.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_customized.mlir:[[# @LINE + 3]]:3: error: 'kernel.customized' block graph needs 262144 bytes of shared memory, over the H100 limit of 232448 bytes per block{{$}}
// CHECK-NOT: {{.}}
func.func @f(%x: tensor<256x256xf16>) -> tensor<256x256xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<256x256xf16>) -> tensor<256x256xf16> {
  ^bb0(%a: tensor<256x256xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<256x256xf16> -> tensor<256x256xf16>
    %e = block.exp %t : tensor<256x256xf16> -> tensor<256x256xf16>
    block.output %e omap [-1, -1, -1] : tensor<256x256xf16>
  }
  func.return %o : tensor<256x256xf16>
}
