"""Branch and bound across kernel depths: prefixes that cannot pay off.

A prefix of ``d`` kernels is worth extending only if some completion could
cost less than the best complete µGraph found at a shallower depth. Every
completion adds at least one kernel, and no kernel costs less than the cost
model's launch and first-load latency (:func:`kernel_floor`); the prefix's
own kernels cost at least their cheapest instantiation at full shapes
(:func:`prefix_cost`, computed with the same beam the completions use). So

    prefix_cost + kernel_floor >= limit

means no completion can win by the cost model, and the prefix is dropped
before its tasks are made. A task (a prefix and the layout or library op of
its next kernel) is dropped likewise when the prefix's cost plus the least
that kernel can cost (:func:`kernel_bound`) reaches the limit, and a worker
skips it when a µGraph found meanwhile has lowered the limit that far.
Without a measure this is exact: the search returns the same µGraph. With
one, ``limit`` is the best cost times ``MEASURED_SLACK`` (how far the model
was measured to misrank), so candidates the device could still prefer are
kept for timing.

This is what keeps small programs from spending the whole budget on a
second kernel depth: a residual add and RMSNorm over 8 × 4096 rows has 8,444
two-kernel prefixes (partial sums of every sub-sum of squares the abstract
expression admits), none of which can beat its one-kernel form.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from mirage_xdsl.search import cost_model
from mirage_xdsl.search.block_layout import Layout
from mirage_xdsl.search.generator import Generator
from mirage_xdsl.search.instantiate import Plan, instantiate
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.rules import Tensor
from mirage_xdsl.search.task import Prefix
from mirage_xdsl.search.ugraph import KernelOp, UGraph

Finish = Callable[[UGraph], tuple[float, UGraph] | None]


def kernel_floor(target: cost_model.Target = cost_model.H100) -> float:
    """The least the cost model charges any kernel: its launch and the
    latency of its first load (library and customized kernels alike)."""
    return target.launch_seconds + target.load_latency_seconds


def prefix_cost(
    generator: Generator,
    prefix: Prefix,
    full_args: Sequence[Tensor],
    options: SearchOptions,
    finish: Finish,
) -> float:
    """The cheapest the prefix's kernels run at full shapes (inf if none fits)."""
    state = generator.state(prefix)
    if state is None:
        return math.inf
    plan = Plan(
        prefix.steps,
        prefix.operands,
        (),
        tuple(t.labels for t in state.tensors),
    )
    program = generator.program
    best = instantiate(
        plan,
        program.name,
        program.dtype,
        full_args,
        generator.full_axes.sizes,
        options,
        finish,
    )
    return best[0][0] if best else math.inf


def kernel_bound(
    generator: Generator,
    item: Layout | KernelOp,
    target: cost_model.Target = cost_model.H100,
) -> float:
    """The least the cost model charges the kernel ``item`` makes: its floor,
    plus reading each argument among its sources once at the bandwidth its
    blocks can draw (a library op: the whole device's; a customized kernel:
    at most one SM's share per block, and it has no more blocks than the
    product of its grid axes' full sizes). A combining kernel that reads
    the keys and values whole in a handful of blocks costs far more than a
    FlashDecoding combine, and this is what tells them apart before their
    block graphs are searched."""
    program = generator.program
    elem = cost_model.ELEMENT_BYTES.get(program.dtype, 2)
    if isinstance(item, Layout):
        sources = item.sources
        sizes = generator.full_axes.sizes
        blocks = math.prod(sizes[t] for t in item.grid)
        bandwidth = min(
            target.dram_bandwidth,
            min(blocks, target.sms) * target.sm_dram_bandwidth,
            cost_model.block_streaming(blocks, target),
        )
    else:
        sources = item.operands
        bandwidth = target.dram_bandwidth
    read = sum(
        math.prod(program.inputs[v]) for v in set(sources) if v < len(program.inputs)
    )
    return kernel_floor(target) + elem * read / bandwidth


def promising(cost: float, limit: float, next_kernel: float | None = None) -> bool:
    """Whether a prefix of this cost may still lead to a µGraph under limit,
    given the least its next kernel costs (any kernel's floor by default)."""
    return cost + (kernel_floor() if next_kernel is None else next_kernel) < limit
