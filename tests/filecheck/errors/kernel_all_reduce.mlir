// RUN: mirage-opt --split-input-file --verify-diagnostics %s 2>&1 | filecheck %s
// RUN: not mirage-opt --split-input-file %s 2>&1 | filecheck %s --check-prefix=FIRST
// Verifier errors of 'kernel.all_reduce': its type and its group size. Each
// case is one chunk and prints exactly one located line; without
// --verify-diagnostics the first one stops the run with exit code 1.
// FIRST: {{\A.*}}errors/kernel_all_reduce.mlir:{{[0-9]+:[0-9]+}}: error: {{.+$}}
// FIRST-NOT: {{.}}

// The sum has its operand's type.
// CHECK: {{\A.*}}errors/kernel_all_reduce.mlir:[[# @LINE + 2]]:3: error: 'kernel.all_reduce' result type tensor<4x4xf16> must equal the input type tensor<4x8xf16>{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x4xf16> {
  %s = kernel.all_reduce %a shards 2 : tensor<4x8xf16> -> tensor<4x4xf16>
  func.return %s : tensor<4x4xf16>
}

// -----

// A group has at least one shard.
// CHECK-NEXT: {{^// -+$}}
// CHECK-NEXT: {{^.*}}errors/kernel_all_reduce.mlir:[[# @LINE + 2]]:3: error: 'kernel.all_reduce' shards must be >= 1, got 0{{$}}
func.func @f(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %s = kernel.all_reduce %a shards 0 : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %s : tensor<4x8xf16>
}
