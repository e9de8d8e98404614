"""``mirage-verify A.mlir B.mlir``: are two programs equivalent?

Runs the probabilistic finite-field verifier (random inputs over Z_p x Z_q,
enough trials for a false-positive bound of 2^-40 unless --trials is given)
and, as a second opinion, compares the programs in fp32 on small random
inputs. Exit code 0 if the verifier finds them equivalent, 1 if not or on
bad input (one located error line; --debug shows the traceback).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import Any

from mirage_xdsl.cli.run import load
from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.verify.equivalence import FLOAT_RTOL, Verdict, equivalent, float_check
from mirage_xdsl.verify.finite_field_torch import gpu_arithmetic
from mirage_xdsl.verify.residue_arith import NUMPY


def bound_text(bound: float) -> str:
    if bound <= 0.0:
        return "0"
    return f"{bound:.3g} (2^{math.log2(bound):.1f})"


def report(verdict: Verdict, float_line: str | None) -> str:
    lines = [
        f"verdict: {'equivalent' if verdict.equivalent else 'NOT equivalent'}",
        f"reason: {verdict.reason}",
        f"trials: {verdict.trials} (per-trial bound {bound_text(verdict.per_trial_bound)})",
    ]
    if verdict.equivalent:
        lines.append(
            f"false-positive bound: {bound_text(verdict.false_positive_bound)}"
        )
    lines.append(f"seconds: {verdict.seconds:.3f}")
    if float_line is not None:
        lines.append(f"float cross-check: {float_line}")
    return "\n".join(lines)


def arithmetic(device: str) -> Any:
    """The finite-field arithmetic for ``--device`` (None: the default)."""
    if device == "auto":
        return None
    if device == "cpu":
        return NUMPY
    if gpu_arithmetic() is None:
        raise MirageError("error: --device cuda: torch sees no CUDA GPU here")
    return gpu_arithmetic()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mirage-verify",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("first", help="a program (.mlir)")
    parser.add_argument("second", help="the program to compare it with (.mlir)")
    parser.add_argument(
        "--trials", type=int, help="number of trials (default: enough for 2^-40)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the trials")
    parser.add_argument(
        "--rtol",
        type=float,
        default=FLOAT_RTOL,
        help="relative tolerance of the float cross-check (default 1e-3)",
    )
    parser.add_argument(
        "--no-float", action="store_true", help="skip the float cross-check"
    )
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where the finite-field arithmetic runs: numpy on the CPU, torch "
        "on a CUDA GPU, or auto (the GPU when torch sees one); the verdict is "
        "the same",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    args = parser.parse_args(argv)
    try:
        if args.trials is not None and args.trials < 1:
            raise MirageError("error: --trials must be at least 1")
        a, b = load(args.first), load(args.second)
        verdict = equivalent(
            a, b, trials=args.trials, seed=args.seed, arith=arithmetic(args.device)
        )
        float_line = None
        if not args.no_float and verdict.trials > 0:
            float_line = float_check(a, b, rtol=args.rtol, seed=args.seed).reason
        print(report(verdict, float_line))
    except MirageError as e:
        if args.debug:
            raise
        print(e, file=sys.stderr)
        return 1
    return 0 if verdict.equivalent else 1


if __name__ == "__main__":
    sys.exit(main())
