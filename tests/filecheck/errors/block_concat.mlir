// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Verifier errors of 'block.concat': its dim and operand shapes. Each case is
// one chunk and prints exactly one located line; without --verify-diagnostics
// the first one stops the run with exit code 1.
// FIRST: {{\A.*}}errors/block_concat.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// Concat along a dim the operands do not have.
// CHECK: {{\A.*}}errors/block_concat.mlir:[[# @LINE + 5]]:5: error: 'block.concat': concat dim 2 out of range for rank 2{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x64xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x64xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    %c = block.concat %t, %t dim 2 : tensor<4x32xf16>, tensor<4x32xf16> -> tensor<4x64xf16>
    block.output %c omap [0, -1, -1] : tensor<4x64xf16>
  }
  func.return %o : tensor<8x64xf16>
}

// -----

// Concat operands that differ outside the concat dim.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/block_concat.mlir:[[# @LINE + 8]]:5: error: 'block.concat': concat operands differ in dimension 0 (4 vs 1){{$}}
// CHECK-NOT: {{.}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x64xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 1 : (tensor<8x32xf16>) -> tensor<8x64xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    %u = block.input %a imap [0, 1, -1] fmap -1 : tensor<8x32xf16> -> tensor<4x32xf16>
    %s = block.reduce_sum %u dim 0 : tensor<4x32xf16> -> tensor<1x32xf16>
    %c = block.concat %t, %s dim 1 : tensor<4x32xf16>, tensor<1x32xf16> -> tensor<4x64xf16>
    block.output %c omap [0, -1, -1] : tensor<4x64xf16>
  }
  func.return %o : tensor<8x64xf16>
}
