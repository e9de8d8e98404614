"""Throughput of the subexpression oracle on the workloads' typical queries.

For each workload, a search-like query stream is built by applying every
kernel-level op kind (via ``op_expr``, with real shapes) to the inputs and to
the surviving results, two levels deep, as a bottom-up generator would; each
new tensor is one oracle query, and only accepted tensors are extended.
Prints, per workload: queries, cache hit rate, verdicts, and queries/second
of the whole oracle, of the cold fast path alone (caches cleared, distinct
normal forms), and of z3 (proofs of accepted terms; rejected terms run to
the timeout, which is what z3 costs when it cannot prove).

``--procedures egraph,z3`` also runs the deciding procedures
(:mod:`~mirage_xdsl.search.pruning.subexpr_egraph`,
:mod:`~mirage_xdsl.search.pruning.subexpr_z3`) on a sample of the distinct
queries (``--procedure-sample``, 0 for all) and prints, for each: queries,
answers (yes/no/unknown), seconds to set up on the targets, seconds per query
(median and total), and disagreements with the fast path, with examples.

    python tools/bench_abstract_expr.py [--scale 1] [--max-queries 4000]
        [--procedures egraph,z3] [--procedure-sample 40]
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time
from collections.abc import Callable, Sequence

from mirage_xdsl.dialects import shapes
from mirage_xdsl.search.pruning import normal_form as nf
from mirage_xdsl.search.pruning.abstract_expr import (
    Expr,
    op_expr,
    output_exprs,
)
from mirage_xdsl.search.pruning.subexpr_egraph import EGraphSubexpr
from mirage_xdsl.search.pruning.subexpr_oracle import SubexprOracle
from mirage_xdsl.search.pruning.subexpr_z3 import Z3GroundSubexpr
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.workloads import WORKLOADS, input_shapes

UNARY = ("exp", "sqrt", "silu", "square", "rms_norm")
BINARY = ("add", "mul", "div", "matmul")
PROCEDURES: dict[str, Callable[[list[Expr]], object]] = {
    "egraph": EGraphSubexpr,
    "z3": Z3GroundSubexpr,
}
"""Deciding procedures by name: each built on the targets, with ``decide``."""
Value = tuple[Expr, tuple[int, ...]]


def _result_shape(kind: str, in_shapes: list[tuple[int, ...]], attrs: dict):
    try:
        if kind == "matmul":
            return shapes.matmul(*in_shapes)
        if kind in ("add", "mul", "div"):
            return shapes.broadcast(*in_shapes)
        if kind == "reduce_sum":
            if in_shapes[0][attrs["dim"]] == 1:
                return None
            return shapes.reduce(in_shapes[0], attrs["dim"])
        return in_shapes[0]
    except shapes.ShapeError:
        return None


def _applications(values: list[Value], fresh: list[Value]):
    """Every op applied to operands of which at least one is fresh."""
    for e, s in fresh:
        for kind in UNARY:
            yield kind, [(e, s)], {}
        for dim in range(len(s)):
            yield "reduce_sum", [(e, s)], {"dim": dim}
    for a, b in itertools.product(values, repeat=2):
        if a in fresh or b in fresh:
            for kind in BINARY:
                yield kind, [a, b], {}


def query_stream(inputs: list[Value], oracle: SubexprOracle, limit: int):
    """Run a two-level bottom-up generation; yields (term, accepted)."""
    values, fresh = list(inputs), list(inputs)
    count = 0
    for _ in range(2):
        new: list[Value] = []
        for kind, operands, attrs in _applications(values, fresh):
            shape = _result_shape(kind, [s for _, s in operands], attrs)
            if shape is None:
                continue
            e = op_expr(kind, [x for x, _ in operands], [s for _, s in operands], attrs)
            ok = oracle.is_subexpr(e)
            yield e, ok
            count += 1
            if ok:
                new.append((e, shape))
            if count >= limit:
                return
        values += new
        fresh = new


def compare(
    procedure: str, targets: list[Expr], queries: list[Expr], cold: SubexprOracle
) -> None:
    """One procedure on ``queries``: answers, time, agreement with the fast path."""
    start = time.perf_counter()
    decider = PROCEDURES[procedure](targets)
    setup = time.perf_counter() - start
    answers = {True: 0, False: 0, None: 0}
    times: list[float] = []
    disagree: list[str] = []
    for e in queries:
        start = time.perf_counter()
        verdict = decider.decide(e)  # type: ignore[attr-defined]
        times.append(time.perf_counter() - start)
        answers[verdict] += 1
        fast = cold.fast_is_subexpr(e)
        if verdict is not None and fast is not None and verdict != fast:
            disagree.append(f"{e}: fast {fast}, {procedure} {verdict}")
    median = statistics.median(times) if times else 0.0
    print(
        f"  {procedure:6s} queries {len(queries):4d}  yes {answers[True]:4d} "
        f"no {answers[False]:4d} unknown {answers[None]:3d}  "
        f"setup {setup:7.3f} s  per query median {median * 1e3:8.2f} ms  "
        f"total {sum(times):8.2f} s  disagreements {len(disagree)}"
    )
    for line in disagree[:5]:
        print(f"    {line}")


def bench(
    name: str,
    scale: int,
    limit: int,
    z3_sample: int,
    procedures: Sequence[str] = (),
    procedure_sample: int = 40,
) -> None:
    module = WORKLOADS[name].module(1, scale)
    fn = entry_function(module)
    targets = output_exprs(fn)
    inputs = [
        (Expr("var", (), f"in{i}"), s) for i, s in enumerate(input_shapes(module))
    ]

    nf.normal_form.cache_clear()
    nf.subexpr.cache_clear()
    oracle = SubexprOracle(targets, use_fallback=False)
    start = time.perf_counter()
    stream = list(query_stream(inputs, oracle, limit))
    whole = time.perf_counter() - start
    st = oracle.stats

    distinct: dict = {}
    for e, ok in stream:
        for p in (e,) if e.head != "concat" else ():
            distinct.setdefault(nf.normal_form(p), (p, ok))
    nf.normal_form.cache_clear()
    nf.subexpr.cache_clear()
    cold = SubexprOracle(targets, use_fallback=False)
    start = time.perf_counter()
    for e, _ in distinct.values():
        cold.fast_is_subexpr(e)
    fast = time.perf_counter() - start

    yes = [e for e, ok in distinct.values() if ok][:z3_sample]
    no = [e for e, ok in distinct.values() if not ok][: max(1, z3_sample // 4)]
    z3o = SubexprOracle(targets, z3_timeout_ms=200)
    z3o.z3_is_subexpr(targets[0], 5000)  # warm up: axioms, solver
    start = time.perf_counter()
    proved = sum(z3o.z3_is_subexpr(e, 5000) is True for e in yes)
    z3_yes = time.perf_counter() - start
    start = time.perf_counter()
    refuted = sum(z3o.z3_is_subexpr(e, 200) is not None for e in no)
    z3_no = time.perf_counter() - start

    print(
        f"{name:17s} queries {st.queries:5d}  hit {st.hit_rate:5.1%}  "
        f"yes {st.verdicts['yes']:4d} no {st.verdicts['no']:4d} "
        f"undecided {st.undecided}  oracle {st.queries / whole:8.0f} q/s  "
        f"fast(cold) {len(distinct) / fast:7.0f} q/s  "
        f"z3 proofs {proved}/{len(yes)} at {len(yes) / z3_yes:6.1f} q/s  "
        f"z3 on rejects {refuted}/{len(no)} decided, {len(no) / z3_no:5.1f} q/s"
    )
    queries = [e for e, _ in distinct.values()]
    if 0 < procedure_sample < len(queries):
        queries = random.Random(name).sample(queries, procedure_sample)
    for procedure in procedures:
        compare(procedure, targets, queries, cold)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--max-queries", type=int, default=4000)
    parser.add_argument("--z3-sample", type=int, default=40)
    parser.add_argument(
        "--procedures",
        default="",
        help=f"comma-separated deciding procedures to compare: {', '.join(PROCEDURES)}",
    )
    parser.add_argument("--procedure-sample", type=int, default=40)
    parser.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    args = parser.parse_args()
    procedures = [p for p in args.procedures.split(",") if p]
    for p in procedures:
        if p not in PROCEDURES:
            parser.error(f"unknown procedure '{p}'")
    for name in args.workloads:
        bench(
            name,
            args.scale,
            args.max_queries,
            args.z3_sample,
            procedures,
            args.procedure_sample,
        )


if __name__ == "__main__":
    main()
