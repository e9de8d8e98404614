"""Structure of a block graph: for-loop phases, outputs and shared memory.

A block graph runs in three phases. Values that depend on a for-loop
partitioned input (``fmap != -1``) are *loop* values, recomputed on every
iteration; values that depend on a ``block.forloop_accum`` are *post* values,
computed once after the loop; everything else is *invariant*. The verifier,
the interpreter and the lowering all read the phases from here.
"""

from __future__ import annotations

from enum import Enum

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import shapes
from mirage_xdsl.gpu_target import H100


class OpVerifyError(VerifyException):
    """A verifier finding about another op than the one being verified.

    Whole-graph checks run in the enclosing op's verifier (a block graph is
    checked by its ``kernel.customized``) but the fault is often one inner
    op; :func:`verify` reports the error at ``op``'s location.
    """

    def __init__(self, op: Operation, message: str):
        super().__init__(message)
        self.op = op


ACCUMULATOR_BYTES = 4
"""Accumulators are kept in fp32."""


class Phase(Enum):
    INVARIANT = 0
    LOOP = 1
    POST = 2


def op_phase(op: Operation, phases: dict[SSAValue, Phase]) -> Phase:
    """Phase of an op's results, given its operands' phases."""
    if op.name == "block.forloop_accum":
        return Phase.POST
    if op.name == "block.input":
        return Phase.LOOP if op.forloop_dim != -1 else Phase.INVARIANT  # type: ignore[attr-defined]
    operand_phases = {phases[v] for v in op.operands}
    if {Phase.LOOP, Phase.POST} <= operand_phases:
        raise OpVerifyError(
            op,
            f"'{op.name}' mixes a per-iteration value with an accumulated one; "
            "per-iteration values must reach it through 'block.forloop_accum'",
        )
    return max(operand_phases, key=lambda p: p.value, default=Phase.INVARIANT)


def phases_of(customized: Operation) -> dict[SSAValue, Phase]:
    """Phase of every value in a customized op's block graph."""
    block = customized.regions[0].block
    phases: dict[SSAValue, Phase] = {a: Phase.INVARIANT for a in block.args}
    for op in block.ops:
        phase = op_phase(op, phases)
        if op.name == "block.forloop_accum" and phases[op.operands[0]] == Phase.POST:
            raise OpVerifyError(
                op, f"'{op.name}' accumulates a value that is already accumulated"
            )
        if op.name == "block.forloop_accum" and any(
            phases[v] == Phase.POST for v in op.operands[1:]
        ):
            raise OpVerifyError(
                op,
                f"'{op.name}' shift is an accumulated value; it must be a "
                "per-iteration or loop-invariant one",
            )
        for r in op.results:
            phases[r] = phase
    return phases


def outputs_of(customized: Operation) -> list[Operation]:
    return [op for op in customized.regions[0].block.ops if op.name == "block.output"]


def element_bytes(ty: TensorType) -> int:
    return ty.element_type.bitwidth // 8  # type: ignore[attr-defined]


def tile_bytes(value: SSAValue) -> int:
    ty = value.type
    assert isinstance(ty, TensorType)
    count = 1
    for d in ty.get_shape():
        count *= d
    if value.owner.name == "block.forloop_accum":  # type: ignore[union-attr]
        return count * ACCUMULATOR_BYTES
    return count * element_bytes(ty)


def shared_memory_bytes(customized: Operation) -> int:
    """Peak shared memory of a block graph, by liveness in program order.

    A tile is live from the op that defines it to its last use; accumulators
    stay live for the whole kernel. Kernel arguments live in device memory and
    cost nothing here.
    """
    ops = list(customized.regions[0].block.ops)
    last_use: dict[SSAValue, int] = {}
    for i, op in enumerate(ops):
        for v in op.operands:
            last_use[v] = i
    live: dict[SSAValue, int] = {}
    peak = 0
    for i, op in enumerate(ops):
        for r in op.results:
            end = len(ops) if op.name == "block.forloop_accum" else last_use.get(r, i)
            live[r] = end
        peak = max(peak, sum(tile_bytes(v) for v, end in live.items() if end >= i))
        live = {v: end for v, end in live.items() if end > i}
    return peak


def check_isolated(op: Operation) -> None:
    """Ops in ``op``'s region use only values defined inside ``op``.

    A block graph sees device tensors only through its arguments (and
    ``block.input``), a thread graph sees tiles only through its operands:
    each level's values live in a different memory.
    """
    for inner in op.walk():
        for index, value in enumerate(inner.operands):
            if inner is not op and not defined_inside(value, op):
                raise OpVerifyError(
                    inner,
                    f"'{inner.name}' uses operand #{index} from outside its "
                    f"'{op.name}', which sees only its own arguments",
                )


def defined_inside(value: SSAValue, op: Operation) -> bool:
    """Whether ``value`` is defined in one of ``op``'s regions."""
    owner = value.owner
    if isinstance(owner, Operation):
        return owner is not op and op.is_ancestor(owner)
    parent = owner.parent_op()
    return parent is not None and op.is_ancestor(parent)


def verify_customized(op: Operation) -> None:
    """Whole-graph checks of a ``kernel.customized`` op (beyond each op's own)."""
    check_isolated(op)
    block = op.regions[0].block
    for inner in block.ops:
        if not inner.name.startswith("block."):
            raise OpVerifyError(
                inner,
                f"'{inner.name}' cannot be in a block graph; '{op.name}' regions "
                "hold only block ops",
            )
    phases = phases_of(op)
    outs = outputs_of(op)
    if len(outs) != len(op.results):
        raise VerifyException(
            f"'{op.name}' has {len(op.results)} results but its block graph has "
            f"{len(outs)} 'block.output' ops"
        )
    forloop = op.forloop  # type: ignore[attr-defined]
    for i, (out, result) in enumerate(zip(outs, op.results, strict=True)):
        if forloop > 1 and phases[out.operands[0]] == Phase.LOOP:
            raise OpVerifyError(
                out,
                f"'block.output' #{i} saves a per-iteration value; accumulate it "
                "with 'block.forloop_accum' first",
            )
        tile = tuple(out.operands[0].type.get_shape())  # type: ignore[attr-defined]
        try:
            full = shapes.stitched_shape(tile, out.output_map, op.grid_dims)  # type: ignore[attr-defined]
        except shapes.ShapeError as e:
            raise OpVerifyError(out, f"'block.output' #{i}: {e}") from None
        got = tuple(result.type.get_shape())  # type: ignore[attr-defined]
        if got != full:
            raise VerifyException(
                f"'{op.name}' result #{i} has shape {list(got)} but its "
                f"'block.output' stitches {list(full)}"
            )
    used = shared_memory_bytes(op)
    limit = H100.shared_memory_per_block
    if used > limit:
        raise VerifyException(
            f"'{op.name}' block graph needs {used} bytes of shared memory, over "
            f"the {H100.name} limit of {limit} bytes per block"
        )
