// RUN: mirage-opt %s | filecheck %s --check-prefix=ROUND
// RUN: mirage-opt -t triton %s | filecheck %s --check-prefix=TRITON
// RUN: mirage-verify %s %S/inputs/attention_plain.mlir | filecheck %s --check-prefix=VERIFY

// Attention with the online softmax: each of the 3 iterations exponentiates
// its scores less their own row maximum %m, and both accumulations are
// shifted by %m, so each term is weighted by exp(m - max over iterations).

// The shift round-trips in the custom syntax, its type after the input's.
// ROUND: block.forloop_accum %pv shift %[[M:[a-z]+]] reduce "none" : tensor<1x10x16xf16>, tensor<1x10x1xf16> -> tensor<1x10x16xf16>
// ROUND: block.forloop_accum %e shift %[[M]] reduce "sum" : tensor<1x10x32xf16>, tensor<1x10x1xf16> -> tensor<1x10x1xf16>

// Triton: one running maximum for the shared shift, -inf before the loop;
// per iteration the new maximum and the two weights, both sums rescaled, and
// the maximum updated last. The product is not fused into the accumulator.
// TRITON:      [[O:acc[0-9]+]] = tl.zeros([1, 16, 16], dtype=tl.float32)  # block.forloop_accum none, shifted
// TRITON-NEXT: [[RMAX:run[0-9]+]] = tl.full([1, 16, 1], float('-inf'), tl.float32)  # running maximum of a shift
// TRITON-NEXT: [[S:acc[0-9]+]] = tl.zeros([1, 16, 1], dtype=tl.float32)  # block.forloop_accum sum, shifted
// TRITON-NEXT: for it in range(0, 3):
// TRITON:          [[M:v[0-9]+]] = tl.max({{.*}}, axis=2, keep_dims=True)  # block.reduce_max
// TRITON:          [[PV:v[0-9]+]] = tl.reshape(tl.dot({{.*}}  # block.matmul
// TRITON-NEXT:     [[TOP:top[0-9]+]] = tl.maximum([[RMAX]], [[M]])
// TRITON-NEXT:     [[WOLD:wold[0-9]+]] = tl.exp([[RMAX]] - [[TOP]])
// TRITON-NEXT:     [[WNEW:wnew[0-9]+]] = tl.exp([[M]] - [[TOP]])
// TRITON-NEXT:     [[O]] = [[O]] * [[WOLD]] + [[PV]] * [[WNEW]]
// TRITON-NEXT:     [[U:u[0-9]+]] = tl.sum({{.*}}, axis=2, keep_dims=True)
// TRITON-NEXT:     [[S]] = [[S]] * [[WOLD]] + [[U]] * [[WNEW]]
// TRITON-NEXT:     [[RMAX]] = [[TOP]]
// TRITON-NEXT: {{v[0-9]+}} = tl.where([[O]] == 0, 0.0, [[O]] / [[S]])  # block.div

// The shifts cancel exactly in the field: equal to the plain exp/sum program.
// VERIFY: verdict: equivalent
// VERIFY: false-positive bound: {{.*}} (2^-{{[4-9][0-9]}}.{{[0-9]}})
// VERIFY: float cross-check: agree in fp32

func.func @online_attention(%q: tensor<1x20x16xf16>, %k: tensor<1x16x96xf16>, %v: tensor<1x96x16xf16>) -> tensor<1x20x16xf16> {
  %o = kernel.customized(%q, %k, %v) grid [1, 2, 1] block [128, 1, 1] forloop 3 : (tensor<1x20x16xf16>, tensor<1x16x96xf16>, tensor<1x96x16xf16>) -> tensor<1x20x16xf16> {
  ^bb0(%a: tensor<1x20x16xf16>, %b: tensor<1x16x96xf16>, %c: tensor<1x96x16xf16>):
    %bq = block.input %a imap [0, 1, -1] fmap -1 : tensor<1x20x16xf16> -> tensor<1x10x16xf16>
    %bk = block.input %b imap [0, -1, -1] fmap 2 : tensor<1x16x96xf16> -> tensor<1x16x32xf16>
    %bv = block.input %c imap [0, -1, -1] fmap 1 : tensor<1x96x16xf16> -> tensor<1x32x16xf16>
    %s = block.matmul %bq, %bk : tensor<1x10x16xf16>, tensor<1x16x32xf16> -> tensor<1x10x32xf16>
    %m = block.reduce_max %s dim 2 : tensor<1x10x32xf16> -> tensor<1x10x1xf16>
    %n = block.neg %m : tensor<1x10x1xf16> -> tensor<1x10x1xf16>
    %d = block.add %s, %n : tensor<1x10x32xf16>, tensor<1x10x1xf16> -> tensor<1x10x32xf16>
    %e = block.exp %d : tensor<1x10x32xf16> -> tensor<1x10x32xf16>
    %pv = block.matmul %e, %bv : tensor<1x10x32xf16>, tensor<1x32x16xf16> -> tensor<1x10x16xf16>
    %acc = block.forloop_accum %pv shift %m reduce "none" : tensor<1x10x16xf16>, tensor<1x10x1xf16> -> tensor<1x10x16xf16>
    %sum = block.forloop_accum %e shift %m reduce "sum" : tensor<1x10x32xf16>, tensor<1x10x1xf16> -> tensor<1x10x1xf16>
    %r = block.div %acc, %sum : tensor<1x10x16xf16>, tensor<1x10x1xf16> -> tensor<1x10x16xf16>
    block.output %r omap [0, 1, -1] : tensor<1x10x16xf16>
  }
  func.return %o : tensor<1x20x16xf16>
}
