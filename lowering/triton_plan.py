"""What the Triton printer decides about a kernel before it prints a line.

Three decisions read only the block graph: which matmuls add straight into
their accumulator with ``tl.dot``, which ops run before the wait for the
kernel ahead (``gdc_wait()``), and where each concatenation's tile lies in
the block's slice of global scratch.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import Phase
from mirage_xdsl.lowering.aliases import is_alias
from mirage_xdsl.lowering.triton_legalize import MATMUL_ATTR


@dataclass(frozen=True)
class KernelPlan:
    """The decisions of :func:`plan_kernel`."""

    fused_accums: dict[block.MatmulOp, block.ForloopAccumOp]
    """Matmuls that add into their accumulator with ``tl.dot``, to it."""
    deferred_accums: dict[block.MatmulOp, block.ForloopAccumOp]
    """Matmuls (form ``defer``) whose accumulator keeps every product term
    and sums over K after the loop, to it."""
    early: frozenset[Operation]
    """The ops that run before ``gdc_wait()``."""
    scratch_start: dict[t.ConcatBase, int]
    """Each concatenation's first element in the block's scratch slice."""
    scratch_elems: int
    """fp32 elements of global scratch each block needs (for concatenations)."""


def plan_kernel(op: kernel.CustomizedOp, phases: dict[SSAValue, Phase]) -> KernelPlan:
    """What ``op``'s kernel fuses, runs early and keeps in scratch."""
    scratch_start, scratch_elems = scratch_layout(op)
    return KernelPlan(
        fused_accums(op, phases),
        fused_accums(op, phases, "defer"),
        frozenset(early_ops(op, phases)),
        scratch_start,
        scratch_elems,
    )


def fused_accums(
    op: kernel.CustomizedOp, phases: dict[SSAValue, Phase], form: str = "dot"
) -> dict[block.MatmulOp, block.ForloopAccumOp]:
    """Matmuls of ``form`` whose only user is a plain accumulator summing them
    over the loop: ``dot`` ones add into it with ``tl.dot``, ``defer`` ones
    keep their product terms in it."""
    fused = {}
    for accum in op.entry.ops:
        if (
            isinstance(accum, block.ForloopAccumOp)
            and accum.reduction == "none"
            and not accum.shifted
            and phases[accum.input] == Phase.LOOP
            and isinstance(accum.input.owner, block.MatmulOp)
            and accum.input.has_one_use()
            and len(t.tensor_shape(accum.input)) == 2
            and accum.input.owner.attributes.get(MATMUL_ATTR) == StringAttr(form)
        ):
            fused[accum.input.owner] = accum
    return fused


def reads_program_input(op: kernel.CustomizedOp, load: block.InputOp) -> bool:
    """Whether ``load`` reads one of the program's own inputs (through any
    reshapes), which no kernel of the program writes."""
    value = op.operands[op.entry.args.index(load.source)]
    while isinstance(value.owner, Operation) and is_alias(value.owner):
        value = value.owner.operands[0]
    return not isinstance(value.owner, Operation)


def early_ops(op: kernel.CustomizedOp, phases: dict[SSAValue, Phase]) -> set[Operation]:
    """The ops that run before ``gdc_wait()``: those computed from the
    program's inputs alone, less any per-iteration value that something
    after the wait uses (the early part has its own pass of the loop, so
    its per-iteration values do not reach the second). Outputs,
    concatenations (block scratch) and online-softmax accumulators (their
    running maximum ends each iteration) stay after the wait."""
    ops = list(op.entry.ops)
    if any(isinstance(o, block.ForloopAccumOp) and o.shifted for o in ops):
        return set()
    independent: set[Operation] = set()
    for o in ops:
        if isinstance(o, block.InputOp):
            if reads_program_input(op, o):
                independent.add(o)
        elif not isinstance(o, (block.OutputOp, t.ConcatBase)):
            if all(v.owner in independent for v in o.operands):
                independent.add(o)
    early = set(independent)
    changed = True
    while changed:
        changed = False
        for o in ops:
            if o in early and not stays_early(o, early, phases, op.forloop):
                early.discard(o)
                changed = True
    return early


def stays_early(
    op: Operation,
    early: set[Operation],
    phases: dict[SSAValue, Phase],
    forloop: int,
) -> bool:
    """Whether ``op`` may run before the wait when ``early`` do: its
    operands are made there, and a per-iteration value is used only there
    (with one iteration there is no loop to pass twice)."""
    made = all(v.owner in early for v in op.operands if isinstance(v.owner, Operation))
    in_loop = forloop > 1 and any(phases[r] == Phase.LOOP for r in op.results)
    return made and (
        not in_loop or all(use.operation in early for r in op.results for use in r.uses)
    )


def scratch_layout(op: kernel.CustomizedOp) -> tuple[dict[t.ConcatBase, int], int]:
    """Each concatenation's start in the block's slice of global scratch
    (its result tile, in program order), and the slice's size."""
    starts: dict[t.ConcatBase, int] = {}
    size = 0
    for concat in op.entry.ops:
        if isinstance(concat, t.ConcatBase):
            starts[concat] = size
            size += prod(t.tensor_shape(concat.result))
    return starts, size
