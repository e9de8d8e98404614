// RUN: not mirage-opt -p no-such-pass %s 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not mirage-opt -p 'canonicalize{nonsense=1}' %s 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not mirage-opt -p 'canonicalize{' %s 2>&1 | filecheck %s --check-prefix=SYNTAX
// A bad -p pipeline is one line naming the pass or the option, exit code 1.

// UNKNOWN: {{\A}}error: unknown pass 'no-such-pass' (mirage-opt --help lists the passes){{$}}
// UNKNOWN-NOT: {{.}}
// OPTION: {{\A}}error: pass 'canonicalize' has no option 'nonsense' (options: none){{$}}
// OPTION-NOT: {{.}}
// SYNTAX: {{\A}}error: bad pass pipeline '-p canonicalize{' at column 14: expected argument name here{{$}}
// SYNTAX-NOT: {{.}}

func.func @f() {
  func.return
}
