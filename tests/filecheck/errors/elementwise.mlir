// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Verifier errors of element-wise kernel ops: broadcasting, element types and
// result shapes. Each case is one chunk and prints exactly one located line;
// without --verify-diagnostics the first one stops the run with exit code 1.
// FIRST: {{\A.*}}errors/elementwise.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// Element-wise operands of different ranks line up at the trailing dims.
// CHECK: {{\A.*}}errors/elementwise.mlir:[[# @LINE + 2]]:3: error: 'kernel.mul': dimension 1 does not broadcast (8 vs 4); sizes must be equal or one of them 1{{$}}
func.func @f(%a: tensor<4x8xf16>, %b: tensor<4xf16>) -> tensor<4x8xf16> {
  %s = kernel.mul %a, %b : tensor<4x8xf16>, tensor<4xf16> -> tensor<4x8xf16>
  func.return %s : tensor<4x8xf16>
}

// -----

// Tiles of different ranks inside a block graph (block.input lifts instead).
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/elementwise.mlir:[[# @LINE + 6]]:5: error: 'block.mul': operand ranks differ (2 vs 1); inside a block graph tiles have equal ranks (block.input lifts a lower-rank tensor){{$}}
func.func @f(%x: tensor<4x8xf16>, %w: tensor<8xf16>) -> tensor<4x8xf16> {
  %o = kernel.customized(%x, %w) grid [1, 1, 1] block [128, 1, 1] forloop 1 : (tensor<4x8xf16>, tensor<8xf16>) -> tensor<4x8xf16> {
  ^bb0(%a: tensor<4x8xf16>, %b: tensor<8xf16>):
    %ta = block.input %a imap [-1, -1, -1] fmap -1 : tensor<4x8xf16> -> tensor<4x8xf16>
    %tb = block.input %b imap [-1, -1, -1] fmap -1 : tensor<8xf16> -> tensor<8xf16>
    %m = block.mul %ta, %tb : tensor<4x8xf16>, tensor<8xf16> -> tensor<4x8xf16>
    block.output %m omap [-1, -1, -1] : tensor<4x8xf16>
  }
  func.return %o : tensor<4x8xf16>
}

// -----

// Element-wise operands that do not broadcast.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/elementwise.mlir:[[# @LINE + 2]]:3: error: 'kernel.add': dimension 1 does not broadcast (8 vs 3); sizes must be equal or one of them 1{{$}}
func.func @f(%a: tensor<4x8xf16>, %b: tensor<4x3xf16>) -> tensor<4x8xf16> {
  %s = kernel.add %a, %b : tensor<4x8xf16>, tensor<4x3xf16> -> tensor<4x8xf16>
  func.return %s : tensor<4x8xf16>
}

// -----

// Integer tensors, which no µGraph op takes.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/elementwise.mlir:[[# @LINE + 2]]:3: error: 'kernel.exp' expects f16, bf16 or f32 elements, got i32{{$}}
func.func @f(%a: tensor<4x8xi32>) -> tensor<4x8xi32> {
  %s = kernel.exp %a : tensor<4x8xi32> -> tensor<4x8xi32>
  func.return %s : tensor<4x8xi32>
}

// -----

// Operands of different element types.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/elementwise.mlir:[[# @LINE + 2]]:3: error: 'kernel.add' mixes element types ['f16', 'f32']; they must agree{{$}}
func.func @f(%a: tensor<4x8xf16>, %b: tensor<4x8xf32>) -> tensor<4x8xf16> {
  %s = kernel.add %a, %b : tensor<4x8xf16>, tensor<4x8xf32> -> tensor<4x8xf16>
  func.return %s : tensor<4x8xf16>
}

// -----

// An activation keeps its operand's element type.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/elementwise.mlir:[[# @LINE + 2]]:3: error: 'kernel.gelu_erf' mixes element types ['f16', 'f32']; they must agree{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf32> {
  %g = kernel.gelu_erf %a : tensor<4x8xf16> -> tensor<4x8xf32>
  func.return %g : tensor<4x8xf32>
}

// -----

// A result type that contradicts the op's shape rule.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/elementwise.mlir:[[# @LINE + 2]]:3: error: 'kernel.exp' result shape [4, 1] does not match the expected [4, 8]{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x1xf16> {
  %s = kernel.exp %a : tensor<4x8xf16> -> tensor<4x1xf16>
  func.return %s : tensor<4x1xf16>
}

// -----

// An activation's result must have its operand's shape.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/elementwise.mlir:[[# @LINE + 3]]:3: error: 'kernel.relu' result shape [4, 1] does not match the expected [4, 8]{{$}}
// CHECK-NOT: {{.}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x1xf16> {
  %r = kernel.relu %a : tensor<4x8xf16> -> tensor<4x1xf16>
  func.return %r : tensor<4x1xf16>
}
