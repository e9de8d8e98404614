"""Time the equivalence verifier on every workload at full shapes.

Run from the project root: ``python tools/bench_verify.py [--batches 1 8]``.
For each workload and batch it verifies the plain program against its first
hand-written µGraph with the default number of trials (enough for a
false-positive bound of 2^-40) and prints one table row: trials, per-trial and
total bound, finite-field seconds (the median of ``--repeat`` verdicts),
float cross-check seconds. ``--arith`` chooses where the finite-field
arithmetic runs: numpy, torch on the CPU, torch on a CUDA GPU, or ``auto``
(the GPU when torch sees one).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from typing import Any

from mirage_xdsl.verify.equivalence import default_arithmetic, equivalent, float_check
from mirage_xdsl.verify.residue_arith import NUMPY
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS


def first_handwritten(workload: str) -> tuple[str, object]:
    return next((n, b) for n, (w, b) in HANDWRITTEN.items() if w == workload)


def arithmetic(name: str) -> Any:
    if name == "auto":
        return default_arithmetic()
    if name == "numpy":
        return NUMPY
    from mirage_xdsl.verify.finite_field_torch import TorchArithmetic

    return TorchArithmetic(name.removeprefix("torch-"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--workloads", nargs="+", default=sorted(WORKLOADS))
    parser.add_argument(
        "--arith", choices=["auto", "numpy", "torch-cpu", "torch-cuda"], default="auto"
    )
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    arith = arithmetic(args.arith)
    print(f"arithmetic: {arith.name}")
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
            verdicts = [
                equivalent(plain, custom, arith=arith) for _ in range(args.repeat)
            ]
            verdict = verdicts[0]
            seconds = statistics.median(v.seconds for v in verdicts)
            start = time.perf_counter()
            check = float_check(plain, custom)
            float_s = time.perf_counter() - start
            bound = f"2^{math.log2(verdict.false_positive_bound):.0f}"
            ok = "equiv" if verdict.equivalent and check.agree else "DIFFER"
            print(
                f"{name:<18}{graph:<24}{batch:>3}{ok:>9}{verdict.trials:>7}"
                f"{bound:>10}{seconds:>8.2f}{float_s:>9.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
