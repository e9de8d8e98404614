// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Verifier errors of 'block.forloop_accum' and the for-loop rules it enforces:
// a per-iteration value reaches an output, or an op after the loop, only
// through an accumulator. Each case is one chunk and prints exactly one located
// line; without --verify-diagnostics the first one stops the run with exit code
// 1.
// FIRST: {{\A.*}}errors/forloop_accum.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// A forloop_accum with an unknown reduction kind.
// CHECK: {{\A.*}}errors/forloop_accum.mlir:[[# @LINE + 5]]:5: error: 'block.forloop_accum' reduce must be one of ['none', 'sum', 'mean', 'rms'], got 'max'{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x1xf16> {
  %o = kernel.customized(%x) grid [1, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>) -> tensor<8x1xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [-1, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<8x8xf16>
    %s = block.forloop_accum %t reduce "max" : tensor<8x8xf16> -> tensor<8x1xf16>
    block.output %s omap [-1, -1, -1] : tensor<8x1xf16>
  }
  func.return %o : tensor<8x1xf16>
}

// -----

// An accumulator of an accumulated value.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/forloop_accum.mlir:[[# @LINE + 6]]:5: error: 'block.forloop_accum' accumulates a value that is already accumulated{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x8xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>) -> tensor<8x8xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<4x8xf16>
    %s = block.forloop_accum %t reduce "none" : tensor<4x8xf16> -> tensor<4x8xf16>
    %r = block.forloop_accum %s reduce "none" : tensor<4x8xf16> -> tensor<4x8xf16>
    block.output %r omap [0, -1, -1] : tensor<4x8xf16>
  }
  func.return %o : tensor<8x8xf16>
}

// -----

// A shift must hold one value per row of the input.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/forloop_accum.mlir:[[# @LINE + 6]]:5: error: 'block.forloop_accum' shift must have shape [4, 1] (one value per row of the input), got [4, 8]{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x8xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>) -> tensor<8x8xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<4x8xf16>
    %e = block.exp %t : tensor<4x8xf16> -> tensor<4x8xf16>
    %s = block.forloop_accum %e shift %t reduce "none" : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xf16>
    block.output %s omap [0, -1, -1] : tensor<4x8xf16>
  }
  func.return %o : tensor<8x8xf16>
}

// -----

// Only sums can be shifted.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/forloop_accum.mlir:[[# @LINE + 7]]:5: error: 'block.forloop_accum' with a shift must reduce 'none' or 'sum', got 'rms'{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x1xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>) -> tensor<8x1xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<4x8xf16>
    %m = block.reduce_max %t dim 1 : tensor<4x8xf16> -> tensor<4x1xf16>
    %e = block.exp %t : tensor<4x8xf16> -> tensor<4x8xf16>
    %s = block.forloop_accum %e shift %m reduce "rms" : tensor<4x8xf16>, tensor<4x1xf16> -> tensor<4x1xf16>
    block.output %s omap [0, -1, -1] : tensor<4x1xf16>
  }
  func.return %o : tensor<8x1xf16>
}

// -----

// A per-iteration value saved without accumulation.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/forloop_accum.mlir:[[# @LINE + 6]]:5: error: 'block.output' #0 saves a per-iteration value; accumulate it with 'block.forloop_accum' first{{$}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x8xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>) -> tensor<8x8xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<4x8xf16>
    %e = block.exp %t : tensor<4x8xf16> -> tensor<4x8xf16>
    block.output %e omap [0, -1, -1] : tensor<4x8xf16>
  }
  func.return %o : tensor<8x8xf16>
}

// -----

// An op mixing a per-iteration value with an accumulated one.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/forloop_accum.mlir:[[# @LINE + 7]]:5: error: 'block.div' mixes a per-iteration value with an accumulated one; per-iteration values must reach it through 'block.forloop_accum'{{$}}
// CHECK-NOT: {{.}}
func.func @f(%x: tensor<8x32xf16>) -> tensor<8x8xf16> {
  %o = kernel.customized(%x) grid [2, 1, 1] block [128, 1, 1] forloop 4 : (tensor<8x32xf16>) -> tensor<8x8xf16> {
  ^bb0(%a: tensor<8x32xf16>):
    %t = block.input %a imap [0, -1, -1] fmap 1 : tensor<8x32xf16> -> tensor<4x8xf16>
    %s = block.forloop_accum %t reduce "sum" : tensor<4x8xf16> -> tensor<4x1xf16>
    %d = block.div %t, %s : tensor<4x8xf16>, tensor<4x1xf16> -> tensor<4x8xf16>
    %r = block.forloop_accum %d reduce "none" : tensor<4x8xf16> -> tensor<4x8xf16>
    block.output %r omap [0, -1, -1] : tensor<4x8xf16>
  }
  func.return %o : tensor<8x8xf16>
}
