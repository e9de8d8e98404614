// RUN: not mirage-opt %s 2>&1 | filecheck %s
// A block graph that needs more than 227 KB of shared memory: exit code 1 and one located line.
// CHECK: {{\A.*}}errors/shared_memory.mlir:7:3: error: 'kernel.customized' block graph needs 262144 bytes of shared memory, over the H100 limit of 232448 bytes per block{{$}}
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
