"""Long fuzz run of the foundation: parser, verifiers, interpreter, drivers.

Runs the oracles of ``mirage_xdsl.fuzz.oracles`` over ``--cases`` seeded
cases split across kinds by weight, on ``--jobs`` processes, and reports the
cases tried and the outcomes per kind, with every failure, crash and hang
(a case over ``--timeout`` seconds). Exit code 1 if any. Replay a case with
``python -c "from mirage_xdsl.fuzz.oracles import ORACLES; ORACLES[KIND](SEED)"``.

    python tools/fuzz.py --cases 100000 --jobs 2
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from multiprocessing import Pool

from mirage_xdsl.fuzz.oracles import ORACLES, FuzzFailure

WEIGHTS = {
    "generate": 1.0,
    "round-trip": 1.0,
    "interpret": 1.0,
    "corrupt": 3.0,
    "perturb": 3.0,
    "driver": 0.01,
    "field": 0.5,
    "mutant": 0.05,
}
"""Share of the cases per kind (a driver case starts a process, a mutant case
runs the equivalence verifier: ~0.3 s each)."""


class Hang(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise Hang


def run_case(job: tuple[str, int, float]) -> tuple[str, int, str, str]:
    """(kind, seed, outcome, detail); outcome is the oracle's label or
    'FAIL', 'CRASH', 'HANG'."""
    kind, seed, timeout = job
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return kind, seed, ORACLES[kind](seed), ""
    except FuzzFailure as e:
        return kind, seed, "FAIL", str(e)
    except Hang:
        return kind, seed, "HANG", f"over {timeout} s"
    except Exception as e:
        frames = traceback.format_exception(e, limit=-4)
        return kind, seed, "CRASH", "".join(frames)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def plan(cases: int, kinds: Sequence[str]) -> dict[str, int]:
    """Cases per kind, proportional to WEIGHTS, at least one each."""
    total = sum(WEIGHTS[k] for k in kinds)
    counts = {k: max(1, round(cases * WEIGHTS[k] / total)) for k in kinds}
    largest = max(kinds, key=lambda k: counts[k])
    counts[largest] += cases - sum(counts.values())
    return counts


def jobs(counts: dict[str, int], seed: int, timeout: float) -> Iterator[tuple]:
    """Cases interleaved across kinds, so partial runs cover every kind."""
    for index in range(max(counts.values())):
        for kind, count in counts.items():
            if index < count:
                yield kind, seed + index, timeout


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=10_000, help="cases in all")
    parser.add_argument(
        "--seed", type=int, default=1_000_000, help="first seed of every kind"
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--kinds", default=",".join(WEIGHTS), help="comma-separated kinds to run"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a case")
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in ORACLES]
    if unknown:
        parser.error(f"unknown kinds {unknown}; known: {', '.join(ORACLES)}")

    counts = plan(args.cases, kinds)
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    problems: list[tuple[str, int, str, str]] = []
    start = time.perf_counter()
    done = 0
    with Pool(args.jobs) as pool:
        work = jobs(counts, args.seed, args.timeout)
        for kind, seed, outcome, detail in pool.imap_unordered(run_case, work, 16):
            outcomes[kind][outcome] += 1
            if outcome in ("FAIL", "CRASH", "HANG"):
                problems.append((kind, seed, outcome, detail))
                print(f"{outcome} {kind} seed {seed}: {detail}", file=sys.stderr)
            done += 1
            if done % 10_000 == 0:
                print(
                    f"... {done} cases, {time.perf_counter() - start:.0f} s", flush=True
                )
    seconds = time.perf_counter() - start

    print(f"{'kind':<12}{'cases':>9}  outcomes")
    for kind in kinds:
        tally = ", ".join(f"{o} {n}" for o, n in sorted(outcomes[kind].items()))
        print(f"{kind:<12}{sum(outcomes[kind].values()):>9}  {tally}")
    crashes = sum(1 for p in problems if p[2] == "CRASH")
    print(
        f"{done} cases in {seconds:.0f} s on {args.jobs} processes "
        f"(seeds from {args.seed}): {len(problems)} problems, {crashes} crashes"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
