"""What a kernel runs, and when: the block graph's ops in kernel order.

A kernel does not run its block graph in program order but phase by phase
(``dialects/block_structure.py``): loop-invariant inputs and ops first, then
the accumulators' set-up, the for-loop body and the accumulator updates, then
the ops after the loop and the output stores. :class:`Schedule` is that
order; the kernel body is emitted in it and the shared-memory plan
(``shared_plan.py``) computes live ranges on it.

Two fusions decide which ``block.matmul`` products never get a tile of their
own: a product whose only user is a plain ``block.forloop_accum`` is added
straight into the accumulator (:func:`fused_accumulations`), and one whose
only user is an element-wise unary op of the same phase goes through that op
on its way out (:func:`epilogue_users`). Both are decided here, once, because
the plan and the emitted code must agree on them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import block
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import Phase
from mirage_xdsl.ops import OPS


@dataclass(frozen=True)
class Schedule:
    """A block graph's ops grouped in the order the kernel runs them.

    The kernel body is emitted in this order and shared memory is planned on
    it, so a tile's live range covers everything that happens to it: every
    loop-invariant input is copied in before any invariant op runs (one
    ``cp.async`` group), the accumulators are updated at the end of each
    iteration, and output tiles are stored after all the ops after the loop.
    Planning on program order instead lets a tile share bytes with an input
    that is still to be read, or with an output still to be stored.
    """

    loads: list[block.InputOp]
    """Loop-invariant inputs, copied into shared memory first."""
    before: list[Operation]
    """Loop-invariant ops, run once before the loop."""
    staged: list[block.InputOp]
    """Per-iteration inputs, prefetched into rings of stages."""
    loop: list[Operation]
    """Ops run on every iteration."""
    accs: list[block.ForloopAccumOp]
    """Accumulators: zeroed before the loop, updated at the end of each iteration."""
    after: list[Operation]
    """Ops run once after the loop."""
    outputs: list[block.OutputOp]
    """Tiles stored to device memory at the end."""

    def order(self) -> list[Operation | str]:
        """Every op in running order; ``"init"`` marks zeroing the accumulators."""
        return [
            *self.loads,
            *self.before,
            "init",
            *self.staged,
            *self.loop,
            *self.accs,
            *self.after,
            *self.outputs,
        ]

    @property
    def init(self) -> int:
        """Position of ``"init"`` in :meth:`order`."""
        return len(self.loads) + len(self.before)

    @property
    def loop_end(self) -> int:
        """Position of the last step of an iteration in :meth:`order`."""
        return self.init + len(self.staged) + len(self.loop) + len(self.accs)


def phase_of(phases: Mapping[SSAValue, Phase], o: Operation) -> Phase:
    """When ``o`` runs; inputs by their for-loop dim, outputs (no results) last."""
    if isinstance(o, block.OutputOp):
        return Phase.POST
    if isinstance(o, block.InputOp):
        return Phase.LOOP if o.forloop_dim != -1 else Phase.INVARIANT
    return phases[o.results[0]]


def is_staged(o: Operation) -> bool:
    """Whether ``o`` is a per-iteration input, kept in a ring of stages."""
    return isinstance(o, block.InputOp) and o.forloop_dim != -1


def schedule_of(
    ops: Sequence[Operation], phase: Callable[[Operation], Phase]
) -> Schedule:
    """Group a block graph's ops (in program order) by when the kernel runs them."""

    def pick(p: Phase, cls: type | None = None, skip: tuple[type, ...] = ()) -> list:
        return [
            o
            for o in ops
            if phase(o) == p
            and (cls is None or isinstance(o, cls))
            and not isinstance(o, skip)
        ]

    return Schedule(
        loads=pick(Phase.INVARIANT, block.InputOp),
        before=pick(Phase.INVARIANT, skip=(block.InputOp,)),
        staged=pick(Phase.LOOP, block.InputOp),
        loop=pick(Phase.LOOP, skip=(block.InputOp,)),
        accs=pick(Phase.POST, block.ForloopAccumOp),
        after=pick(Phase.POST, skip=(block.ForloopAccumOp, block.OutputOp)),
        outputs=pick(Phase.POST, block.OutputOp),
    )


def fused_accumulations(
    schedule: Schedule, forloop: int
) -> dict[block.MatmulOp, block.ForloopAccumOp]:
    """Loop matmuls whose product is added straight into its accumulator.

    Only a plain (``"none"``, unshifted) accumulator that is the product's
    only user qualifies, and only with more than one iteration.
    """
    return {
        o: o.results[0].get_user_of_unique_use()
        for o in schedule.loop
        if isinstance(o, block.MatmulOp)
        and forloop > 1
        and o.results[0].has_one_use()
        and isinstance(o.results[0].get_user_of_unique_use(), block.ForloopAccumOp)
        and o.results[0].get_user_of_unique_use().reduction == "none"  # type: ignore[union-attr]
        and not o.results[0].get_user_of_unique_use().shifted  # type: ignore[union-attr]
    }


def epilogue_users(
    ops: Sequence[Operation],
    fused: Mapping[block.MatmulOp, block.ForloopAccumOp],
    phase: Callable[[Operation], Phase],
) -> dict[block.MatmulOp, t.UnaryOp]:
    """Matmuls whose only user, an element-wise unary op, runs in their epilogue.

    The user must run in the same phase as the matmul (``exp(Q·K)``); its
    result tile is written by the matmul, which gets no tile of its own.
    """
    return {
        o: user
        for o in ops
        if isinstance(o, block.MatmulOp)
        and o not in fused
        and o.results[0].has_one_use()
        and isinstance(user := o.results[0].get_user_of_unique_use(), t.UnaryOp)
        and OPS[user.KIND].cuda is not None
        and phase(user) == phase(o)
    }
