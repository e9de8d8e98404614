// RUN: not mirage-opt -t "dot{format=png}" %s 2>&1 | filecheck %s

// CHECK: error: target 'dot' option format must be dot or svg, got 'png' (PNG is binary: use tools/render_dot.py)
// CHECK-NOT: Traceback

func.func @f(%x: tensor<2x2xf16>) -> tensor<2x2xf16> {
  func.return %x : tensor<2x2xf16>
}
