// RUN: mirage-opt %s | filecheck %s
// An input with no operations (only comments) is an empty module, as for mlir-opt.

// CHECK:      builtin.module {
// CHECK-NEXT: }
