"""Time the equivalence verifier on every workload at full shapes.

Run from the project root: ``python tools/bench_verify.py [--batches 1 8]``.
For each workload and batch it verifies the plain program against its first
hand-written µGraph with the default number of trials (enough for a
false-positive bound of 2^-40) and prints one table row: trials, per-trial and
total bound, finite-field seconds, float cross-check seconds.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

from mirage_xdsl.verify import equivalent, float_check
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS


def first_handwritten(workload: str) -> tuple[str, object]:
    return next((n, b) for n, (w, b) in HANDWRITTEN.items() if w == workload)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--workloads", nargs="+", default=sorted(WORKLOADS))
    args = parser.parse_args()
    header = (
        f"{'workload':<18}{'µGraph':<24}{'b':>3}{'verdict':>9}{'trials':>7}"
        f"{'bound':>10}{'ff s':>8}{'float s':>9}"
    )
    print(header)
    print("-" * len(header))
    for name in args.workloads:
        graph, build = first_handwritten(name)
        for batch in args.batches:
            plain = WORKLOADS[name].module(batch, args.scale)
            custom = build(batch, args.scale)  # type: ignore[operator]
            verdict = equivalent(plain, custom)
            start = time.perf_counter()
            check = float_check(plain, custom)
            float_s = time.perf_counter() - start
            bound = f"2^{math.log2(verdict.false_positive_bound):.0f}"
            ok = "equiv" if verdict.equivalent and check.agree else "DIFFER"
            print(
                f"{name:<18}{graph:<24}{batch:>3}{ok:>9}{verdict.trials:>7}"
                f"{bound:>10}{verdict.seconds:>8.2f}{float_s:>9.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
