"""Choosing the result: rank the screened candidates, verify, pick.

Without a measure the cost model decides: the cheapest verified candidate
wins. With one (a GPU), the verified candidates are timed beside the input
and the fastest wins; the timed pool is chosen so that the model's likeliest
errors are put to the device (:func:`by_kernel_count`, :func:`distinct`).
The default builds are always candidates: the input program (one default
kernel per op) and, for a row-local program, its ops fused into one kernel
over whole rows (:func:`default_builds`, ``fusion.py``); so the result is
never slower than the best of them by the model's (or the device's) account.

Choosing keeps to the search's deadline: verification stops when it is
reached, and so does timing, after the input (the baseline every pick needs),
the default builds and the search's cheapest candidates of its two cheapest
kernel counts (:data:`ALWAYS_TIMED`). When timing decides, the candidates
after those are verified one by one as they come up to be timed.
"""

from __future__ import annotations

import itertools
import math
from contextlib import closing

from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.search import cost_model
from mirage_xdsl.search.budget import Stop
from mirage_xdsl.search.fusion import row_fused
from mirage_xdsl.search.optimizer import optimize
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.report import Candidate, Report
from mirage_xdsl.search.screening import verified, verifying
from mirage_xdsl.search.timing import Entry, Measure, measured_pick
from mirage_xdsl.search.ugraph import UGraph

MEASURED_SLACK = 2.0
"""When a GPU decides, candidates the cost model puts up to this many times the
input's cost are still timed: within one program its ratios are off by about
that much (qknorm_gqa's one-kernel forms, costed at 0.8 of the input, took
twice the input's time on the H100), and the input is always timed beside
them, so a candidate slower than the input is never chosen."""

ALWAYS_TIMED = 2
"""The search's verified candidates timed whatever the clock says, beside the
input and the default builds: the cheapest of each of the two cheapest
kernel counts, which :func:`by_kernel_count` puts first. One was not enough: the
attention of a decode layer, tuned from a cold cache, timed only its
cheapest candidate, one kernel (costed 5.9 µs, 12.2 measured), and never the
two-kernel split (costed 6.3, 4.8 measured in the next run). Building and tuning a candidate
takes seconds (its Triton settings compiled and timed), so a segment given a
small share used to time the input alone once the input's own tuning had
spent it: a choice between one program, with the search's pick never run
(RMSNorm + q/k/v of a decode layer in 9 s: the input kept, the one-kernel
form the search had found not timed). Past the deadline a candidate's
kernels get their default settings (``budget.timing_until``), so this costs
a segment one build at most."""

PER_KERNEL_COUNT = 2
"""Candidates of each kernel count moved to the front of the measured pool."""


def baselines(
    program: ModuleOp,
    input_graph: UGraph,
    input_cost: float,
    options: SearchOptions,
    report: Report,
    previous: UGraph | None = None,
) -> list[Entry]:
    """What every pick must beat: the input, then the default builds
    (:func:`default_builds`, verified whatever the clock says, as the input
    is kept: on a loaded machine a 6 s search of a LayerNorm as plain ops
    reached its deadline before this verdict, and kept its 6 kernels instead
    of the one) and ``previous`` (the verified pick of a shorter search of
    the same program, from the cache)."""
    report.phases.setdefault("verify", 0.0)
    defaults = [
        (c.cost, c.graph)
        for c in verified(
            program, default_builds(input_graph, options), 2, options, report
        )
    ]
    seen = {shape_key(g) for _, g in [(input_cost, input_graph), *defaults]}
    if previous is not None and shape_key(previous) not in seen:
        defaults.append((cost_model.cost(previous), previous))
    return [(input_cost, input_graph), *defaults]


def pick(
    program: ModuleOp,
    input_graph: UGraph,
    input_cost: float,
    candidates: list[Candidate],
    options: SearchOptions,
    measure: Measure | None,
    stop: Stop,
    report: Report,
    deadline: float = math.inf,
    previous: UGraph | None = None,
) -> tuple[float, UGraph]:
    """The chosen candidate (or the input) and its cost, chosen by
    ``deadline``. The :func:`baselines` are always in the pool; on a GPU
    they and the search's :data:`ALWAYS_TIMED` cheapest candidates are timed
    even past the deadline, the baselines tuned in full."""
    base = baselines(program, input_graph, input_cost, options, report, previous)
    top = (
        options.verify_top
        if measure is None
        else max(options.verify_top, options.measure_top)
    )
    want = 1 if stop.reason else top  # a stop ends it early
    ceiling = input_cost * slack(measure)
    ranked = [
        c
        for c in sorted((c for c in candidates if c.screened), key=Candidate.order)
        if c.cost < ceiling
    ]
    if measure is None:
        chosen = [
            (c.cost, c.graph)
            for c in verified(program, ranked, want, options, report, deadline)
        ]
        return min([*base, *chosen], key=lambda x: (x[0], x[1].kernels))
    # verified as they are timed: a candidate the deadline leaves untimed
    # is not verified either (the batch-8 decode attention verified 5 in
    # 29 s at full shapes and timed 3)
    ranked = by_kernel_count(distinct(ranked))
    with closing(verifying(program, ranked, want, options, report, deadline)) as it:
        stream = ((c.cost, c.graph) for c in it)
        lead = list(itertools.islice(stream, ALWAYS_TIMED))
        pool = [*base, *lead]
        return measured_pick(
            pool, measure, report, deadline, len(pool), len(base), stream
        )


def default_builds(input_graph: UGraph, options: SearchOptions) -> list[Candidate]:
    """Builds that need no search, beside the input (one default kernel per
    op): its ops fused into one kernel over whole rows where they allow it
    (``fusion.py``)."""
    fused = row_fused(input_graph)
    built = optimize(fused, options.blockdims) if fused is not None else None
    if built is None:
        return []
    return [Candidate(cost_model.cost(built), built, True)]


def slack(measure: Measure | None) -> float:
    """How far above the best (or the input) a candidate may cost and still
    count: 1 when the cost model decides, MEASURED_SLACK when a GPU does."""
    return 1.0 if measure is None else MEASURED_SLACK


def shape_key(graph: UGraph) -> tuple:
    """How a µGraph tiles the work: per kernel, its operands, grid, for-loop,
    and input and output maps. Candidates that share it move the same tiles
    and differ only in how the block computes on them (op order, ``rms``
    against ``mean`` then ``sqrt``), which times within noise of each other."""
    out = []
    for op in graph.ops:
        g = op.graph
        if g is None:
            out.append((op.kind, op.operands, op.attrs))
            continue
        out.append(
            (
                op.operands,
                g.grid,
                g.forloop,
                tuple(sorted((i.source, i.imap, i.fmap) for i in g.inputs)),
                tuple(sorted(omap for _, omap in g.outputs)),
            )
        )
    return tuple(out)


def distinct(ranked: list[Candidate]) -> list[Candidate]:
    """``ranked`` without candidates whose :func:`shape_key` an earlier
    (cheaper) one has: the timed pool is small, each slot should be a
    different kernel."""
    seen: set[tuple] = set()
    out = []
    for c in ranked:
        key = shape_key(c.graph)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def tiling(graph: UGraph) -> tuple:
    """How a µGraph splits the work over blocks, coarser than
    :func:`shape_key`: per kernel, its library op's kind, or the sizes of its
    grid in any order. Candidates that share it differ in their for-loop's
    length or in which of two equal-sized axes each grid dimension walks (a
    decode attention's batch against its heads, both 8), and time within a
    few percent of each other (35.6 and 37.6 µs for the two mirror images of
    the batch-8 decode attention on the H200, 34.6 with half the for-loop)."""
    return tuple(
        op.kind if op.graph is None else tuple(sorted(op.graph.grid))
        for op in graph.ops
    )


def customized_only(graph: UGraph) -> bool:
    return all(op.graph is not None for op in graph.ops)


def by_kernel_count(ranked: list[Candidate]) -> list[Candidate]:
    """``ranked`` with :data:`PER_KERNEL_COUNT` candidates of each kernel
    count first, then the rest: the cheapest of each kernel count (in cost
    order), then of each the cheapest that tiles the work differently
    (:func:`tiling`), made of customized kernels only where there is one.

    For measured selection: the cost model's sharpest error is the price of a
    kernel boundary (a launch against more blocks in flight, as split-K and
    FlashDecoding trade), so the timed pool holds each structure's best
    rather than eight sizes of the one the model likes most.

    Its next sharpest are a library op's speed and how many blocks a grid
    keeps in flight. The model prices a library op as a vendor kernel, but it
    runs as the default lowering's kernel (RMSNorm + linear's
    ``matmul``-then-combine pairs, costed 17.1 µs, took 28.7 µs on the H100;
    split-K, costed 17.6 µs, took 19.8). And the batch-8 decode attention
    over 4096 keys, with all 8 heads in each of 512 blocks, costed 37.1 µs and
    took 35.6 on the H200, where one head in each of 2048 blocks, costed
    44.3, took 27.6; the library score matmul followed by a kernel, costed
    41.0, took 66.2. So the second is the cheapest customized-only candidate
    that tiles the work otherwise than the first."""
    firsts: list[int] = []
    seconds: list[int] = []
    for count in dict.fromkeys(c.graph.kernels for c in ranked):
        same = [i for i, c in enumerate(ranked) if c.graph.kernels == count]
        first = tiling(ranked[same[0]].graph)
        others = [i for i in same[1:] if tiling(ranked[i].graph) != first]
        custom = [i for i in others if customized_only(ranked[i].graph)]
        firsts.append(same[0])
        seconds += (custom or others)[: PER_KERNEL_COUNT - 1]
    lead = firsts + sorted(seconds)
    chosen = set(lead)
    return [ranked[i] for i in lead] + [
        c for i, c in enumerate(ranked) if i not in chosen
    ]
