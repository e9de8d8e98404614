// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Verifier errors of 'block.input': what it reads and how its imap and fmap
// tile it. Each case is one chunk and prints exactly one located line; without
// --verify-diagnostics the first one stops the run with exit code 1.
// FIRST: {{\A.*}}errors/block_input.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// A block.input reading a value that is not a kernel argument.
// CHECK: {{\A.*}}errors/block_input.mlir:[[# @LINE + 5]]:5: error: 'block.input' must read an argument of the customized kernel{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    %u = block.input %t imap [-1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %u omap [-1, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// An imap without one entry per grid dim.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/block_input.mlir:[[# @LINE + 4]]:5: error: 'block.input': imap needs 3 entries (x, y, z), got 2{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    block.output %t omap [0, -1, -1] : tensor<4x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// An imap entry naming a tensor dim that does not exist.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/block_input.mlir:[[# @LINE + 4]]:5: error: 'block.input': imap maps grid dim 0 to tensor dim 2, out of range for rank 2{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [2, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    block.output %t omap [0, -1, -1] : tensor<4x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// An imap splitting one tensor dim across two grid dims.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/block_input.mlir:[[# @LINE + 4]]:5: error: 'block.input': imap maps two grid dims to tensor dim 0{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [2, 2, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, 0, -1] fmap -1 : tensor<8x32xf16> -> tensor<2x32xf16>
    block.output %t omap [0, 1, -1] : tensor<2x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// An imap whose grid size does not divide the tensor dim.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/block_input.mlir:[[# @LINE + 4]]:5: error: 'block.input': imap splits dim 1 (size 32) across grid dim 0 of size 3, which does not divide it{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [3, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [1, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x10xf16>
    block.output %t omap [1, -1, -1] : tensor<8x10xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// An fmap naming a tensor dim that does not exist.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/block_input.mlir:[[# @LINE + 4]]:5: error: 'block.input': fmap dim 3 out of range for rank 2{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap 3 : tensor<8x32xf16> -> tensor<4x32xf16>
    block.output %t omap [0, -1, -1] : tensor<4x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// An fmap whose for-loop range does not divide the tile.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/block_input.mlir:[[# @LINE + 4]]:5: error: 'block.input': fmap splits dim 1 (size 32 per block) across 5 for-loop iterations, which does not divide it{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 5 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<4x6xf16>
    %s = block.forloop_accum %t reduce "none" : tensor<4x6xf16> -> tensor<4x6xf16>
    block.output %s omap [0, -1, -1] : tensor<4x6xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// A block.input whose tile type contradicts its maps.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/block_input.mlir:[[# @LINE + 5]]:5: error: 'block.input' result shape [8, 32] does not match the expected [4, 32]{{$}}
// CHECK-NOT: {{.}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<16x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<16x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<8x32xf16>
    block.output %t omap [0, -1, -1] : tensor<8x32xf16>
  }
  func.return %o : tensor<16x32xf16>
}
