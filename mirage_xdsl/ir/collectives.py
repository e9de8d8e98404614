"""A shard's program cut at its collectives into stages of ordinary kernels.

A tensor-parallel program is one function per shard whose ``kernel.all_reduce``
ops sum values over the shards. Everything between two collectives is an
ordinary µGraph program, which the interpreter, the search and the GPU
runtime take as they are; the collectives run between them (in-process, or
through NCCL). :func:`split_stages` makes that cut:

- an op's *stage* is the most collectives on any path from the function's
  arguments to it; the ops of one stage, in program order, form one function;
- a collective whose operand is made in stage ``s`` runs after stage ``s``,
  and its result is read from stage ``s + 1`` on;
- the ops of stage ``s`` that its collectives need come first, the rest of
  the stage after the collectives start: a runtime runs that rest while the
  sums are in flight (NCCL on its own stream).

Work that does not depend on a collective lands in the earliest stage, so each
collective waits only for what it needs, and overlaps the work that does not
feed it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue

from mirage_xdsl.dialects import kernel
from mirage_xdsl.ir.regions import outside_operands


@dataclass
class Stage:
    """Ops between collectives, as a function of their own."""

    module: ModuleOp
    """One ``func.func`` of ordinary kernel ops."""
    inputs: list[SSAValue]
    """The values of the shard's function that its arguments hold."""
    outputs: list[SSAValue]
    """The values of the shard's function that its results give."""
    reduces: list[kernel.AllReduceOp]
    """The collectives to start once this stage is done, in program order."""
    views: list[kernel.ReshapeOp]
    """Reshapes of what the stage reads, taken before it runs: they move
    nothing, so no kernel computes them (a GPU program cannot return one)."""


@dataclass
class Staged:
    """A shard's function as stages with collectives between them."""

    arguments: list[SSAValue]
    stages: list[Stage]
    results: list[SSAValue]
    """What the function returns."""


def stage_numbers(ops: Sequence[Operation]) -> dict[Operation, int]:
    """Each op's stage: the most collectives on a path to it (a collective
    counts itself, so it carries the stage that reads its result)."""
    made: dict[SSAValue, int] = {}
    numbers: dict[Operation, int] = {}
    for op in ops:
        n = max((made.get(v, 0) for v in op.operands), default=0)
        n += 1 if isinstance(op, kernel.AllReduceOp) else 0
        numbers[op] = n
        for r in op.results:
            made[r] = n
    return numbers


def split_stages(fn: func.FuncOp) -> Staged:
    """``fn`` cut at its ``kernel.all_reduce`` ops (see the module docstring).

    The ops of one stage that its collectives need come first, as a stage
    of their own followed by those collectives; the rest of the stage
    follows, so a runtime can run it while the sums are in flight. A
    function without collectives is one stage; a stage with no ops (a
    collective of an argument) is kept, empty.
    """
    body = [op for op in fn.body.block.ops if not isinstance(op, func.ReturnOp)]
    returned = list(fn.body.block.last_op.operands)  # type: ignore[union-attr]
    numbers = stage_numbers(body)
    count = 1 + max(numbers.values(), default=0)
    groups: list[list[Operation]] = [[] for _ in range(count)]
    reduces: list[list[kernel.AllReduceOp]] = [[] for _ in range(count)]
    for op in body:
        if isinstance(op, kernel.AllReduceOp):
            reduces[numbers[op] - 1].append(op)
        else:
            groups[numbers[op]].append(op)
    pieces: list[tuple[list[Operation], list[kernel.AllReduceOp]]] = []
    for ops, sums in zip(groups, reduces, strict=True):
        early = _feeding(ops, [r.input for r in sums]) if sums else set(ops)
        pieces.append(([op for op in ops if op in early], sums))
        if late := [op for op in ops if op not in early]:
            pieces.append((late, []))
    read_later: set[SSAValue] = set(returned)
    stages: list[Stage] = []
    for i in reversed(range(len(pieces))):
        ops, sums = pieces[i]
        views = _views(ops)
        computed = [op for op in ops if op not in views]
        needed = read_later | {r.input for r in sums}
        made = [r for op in computed for r in op.results if r in needed]
        module = _function(f"{fn.sym_name.data}_stage{i}", computed, made)
        stage = Stage(module, outside_operands(computed), made, sums, views)
        stages.append(stage)
        read_later |= set(outside_operands(ops)) | {r.input for r in sums}
    return Staged(list(fn.args), stages[::-1], returned)


def _views(ops: Sequence[Operation]) -> list[kernel.ReshapeOp]:
    """The reshapes among ``ops`` of values no other op of ``ops`` computes."""
    computed: set[SSAValue] = set()
    views: list[kernel.ReshapeOp] = []
    for op in ops:
        if isinstance(op, kernel.ReshapeOp) and op.input not in computed:
            views.append(op)
        else:
            computed.update(op.results)
    return views


def _feeding(ops: Sequence[Operation], values: Sequence[SSAValue]) -> set[Operation]:
    """The ops of ``ops`` that ``values`` depend on."""
    wanted, feeding = set(values), set()
    for op in reversed(ops):
        if any(r in wanted for r in op.results):
            feeding.add(op)
            wanted.update(op.operands)
    return feeding


def _function(name: str, ops: Sequence[Operation], outputs: list[SSAValue]) -> ModuleOp:
    """A module of one function computing ``outputs`` with clones of ``ops``."""
    inputs = outside_operands(ops)
    block = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, block.args, strict=True))
    for op in ops:
        block.add_op(op.clone(value_mapper=mapping))
    block.add_op(func.ReturnOp(*(mapping[v] for v in outputs)))
    types = ([v.type for v in inputs], [v.type for v in outputs])
    return ModuleOp([func.FuncOp(name, types, Region(block))])
