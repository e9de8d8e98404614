// RUN: mirage-opt --help | filecheck %s
// --help explains the tool, its error policy and lists our passes and targets.

// CHECK: mirage-opt: the mirage-xdsl superoptimizer driver.
// CHECK: --superoptimize
// CHECK: --debug
// CHECK: mirage-xdsl passes (-p NAME or -p NAME{option=value}):
// CHECK: mirage-xdsl targets (-t NAME):
