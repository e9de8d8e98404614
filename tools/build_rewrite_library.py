"""Build the bundled rewrite library, ``mirage_xdsl/rewrites/library/``.

For every single-output workload (batch 1, full shapes) and every layer piece
of ``mirage_xdsl.layers``, take an optimized µGraph and emit it as a PDL
pattern plus template. With ``--search`` the µGraph is the one the
superoptimizer finds from the plain program; without it, the verified
hand-written µGraph of the workload. Every entry is checked with the
finite-field verifier before it is written.

    python tools/build_rewrite_library.py [--search] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.layers import FRAGMENTS
from mirage_xdsl.rewrites.emit import library_module
from mirage_xdsl.rewrites.library import BUNDLED
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.verify.equivalence import equivalent
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS


def handwritten_for(workload: str):
    """The first hand-written µGraph of a workload, or None."""
    for target, build in HANDWRITTEN.values():
        if target == workload:
            return build
    return None


def candidates() -> dict[str, tuple]:
    """name -> (plain builder, optimized builder) for single-output programs."""
    pairs = {}
    for name, workload in WORKLOADS.items():
        build = handwritten_for(name)
        plain = workload.module(1)
        if build is not None and len(entry_function(plain).function_type.outputs) == 1:
            pairs[name] = (lambda w=workload: w.module(1), lambda b=build: b(1))
    for name, (plain, fused) in FRAGMENTS.items():
        pairs[name] = (lambda p=plain: p(1), lambda f=fused: f(1))
    return pairs


def optimized(plain, fallback, use_search: bool):
    if not use_search:
        return fallback()
    from mirage_xdsl import superoptimize

    return superoptimize(plain.clone())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--search", action="store_true", help="use the superoptimizer")
    parser.add_argument("--out", type=Path, default=BUNDLED, help="library directory")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, (plain_build, opt_build) in candidates().items():
        start = time.perf_counter()
        plain = plain_build()
        best = optimized(plain, opt_build, args.search)
        verdict = equivalent(plain, best)
        if not verdict.equivalent:
            print(f"{name}: skipped, not equivalent ({verdict.reason})")
            continue
        library = library_module([(entry_function(plain), entry_function(best), name)])
        (args.out / f"{name}.mlir").write_text(module_text(library))
        print(
            f"{name}: written, verified (bound {verdict.false_positive_bound:.1e}) "
            f"in {time.perf_counter() - start:.1f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
