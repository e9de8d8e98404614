"""Throughput of the subexpression oracle on the workloads' typical queries.

For each workload, a search-like query stream is built by applying every
kernel-level op kind (via ``op_expr``, with real shapes) to the inputs and to
the surviving results, two levels deep, as a bottom-up generator would; each
new tensor is one oracle query, and only accepted tensors are extended.
Prints, per workload: queries, cache hit rate, verdicts, and queries/second
of the whole oracle, of the cold fast path alone (caches cleared, distinct
normal forms), and of z3 (proofs of accepted terms; rejected terms run to
the timeout, which is what z3 costs when it cannot prove).

    python tools/bench_abstract_expr.py [--scale 1] [--max-queries 4000]
"""

from __future__ import annotations

import argparse
import itertools
import time

from mirage_xdsl.dialects import shapes
from mirage_xdsl.search.pruning import normal_form as nf
from mirage_xdsl.search.pruning.abstract_expr import (
    Expr,
    op_expr,
    output_exprs,
)
from mirage_xdsl.search.pruning.subexpr_oracle import SubexprOracle
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.workloads import WORKLOADS, input_shapes

UNARY = ("exp", "sqrt", "silu", "square", "rms_norm")
BINARY = ("add", "mul", "div", "matmul")
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


def bench(name: str, scale: int, limit: int, z3_sample: int) -> None:
    module = WORKLOADS[name].module(1, scale)
    fn = entry_function(module)
    targets = output_exprs(fn)
    inputs = [
        (Expr("var", (), f"in{i}"), s) for i, s in enumerate(input_shapes(module))
    ]

    nf.normal_form.cache_clear()
    nf.subexpr.cache_clear()
    oracle = SubexprOracle(targets, use_z3=False)
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
    cold = SubexprOracle(targets, use_z3=False)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--max-queries", type=int, default=4000)
    parser.add_argument("--z3-sample", type=int, default=40)
    parser.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    args = parser.parse_args()
    for name in args.workloads:
        bench(name, args.scale, args.max_queries, args.z3_sample)


if __name__ == "__main__":
    main()
