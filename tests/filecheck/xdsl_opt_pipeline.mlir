// RUN: xdsl-opt -p cse,canonicalize %s | mirage-opt -t dot | filecheck %s

// Stock xdsl-opt loads the kernel dialect through the xdsl.universe entry
// point; xDSL's own cse and canonicalize merge the repeated exp and drop the
// unused square (kernel ops are Pure), and mirage-opt draws the result.

// CHECK:     label="func @twice"
// CHECK:     label="kernel.matmul\n4x8xf16"
// CHECK:     label="kernel.exp\n4x8xf16"
// CHECK-NOT: kernel.exp
// CHECK-NOT: kernel.square
// CHECK:     label="kernel.add\n4x8xf16"

func.func @twice(%x: tensor<4x16xf16>, %w: tensor<16x8xf16>) -> tensor<4x8xf16> {
  %m = kernel.matmul %x, %w : tensor<4x16xf16>, tensor<16x8xf16> -> tensor<4x8xf16>
  %a = kernel.exp %m : tensor<4x8xf16> -> tensor<4x8xf16>
  %b = kernel.exp %m : tensor<4x8xf16> -> tensor<4x8xf16>
  %dead = kernel.square %m : tensor<4x8xf16> -> tensor<4x8xf16>
  %s = kernel.add %a, %b : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %s : tensor<4x8xf16>
}
