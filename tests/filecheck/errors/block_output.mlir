// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Verifier errors of 'block.output': how its omap stitches the tiles. Each case
// is one chunk and prints exactly one located line; without
// --verify-diagnostics the first one stops the run with exit code 1.
// FIRST: {{\A.*}}errors/block_output.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// An omap naming a tile dim that does not exist.
// CHECK: {{\A.*}}errors/block_output.mlir:[[# @LINE + 5]]:5: error: 'block.output': omap maps grid dim 0 to tensor dim 5, out of range for rank 2{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    block.output %t omap [5, -1, -1] : tensor<4x32xf16>
  }
  func.return %o : tensor<8x32xf16>
}

// -----

// An omap that leaves a grid dim of size > 1 unmapped.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/block_output.mlir:[[# @LINE + 6]]:5: error: 'block.output': omap leaves grid dim 0 (size 2) unmapped, so 2 blocks would write the same output tile{{$}}
// CHECK-NOT: {{.}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<4x32xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<4x32xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    block.output %t omap [-1, -1, -1] : tensor<4x32xf16>
  }
  func.return %o : tensor<4x32xf16>
}
