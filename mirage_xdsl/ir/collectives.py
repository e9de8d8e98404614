"""A shard's program cut at its collectives into stages of ordinary kernels.

A tensor-parallel program is one function per shard whose ``kernel.all_reduce``
ops sum values over the shards. Everything between two collectives is an
ordinary µGraph program, which the interpreter, the search and the GPU
runtime take as they are; the collectives run between them (in-process, or
through NCCL). :func:`split_stages` makes that cut:

- an op's *stage* is the most collectives on any path from the function's
  arguments to it; the ops of one stage, in program order, form one function;
- a collective whose operand is made in stage ``s`` runs after stage ``s``,
  and its result is read from stage ``s + 1`` on.

Work that does not depend on a collective lands in the earliest stage, so each
collective waits only for what it needs.
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
    """The ops between two collectives, as a function of their own."""

    module: ModuleOp
    """One ``func.func`` of ordinary kernel ops."""
    inputs: list[SSAValue]
    """The values of the shard's function that its arguments hold."""
    outputs: list[SSAValue]
    """The values of the shard's function that its results give."""
    reduces: list[kernel.AllReduceOp]
    """The collectives to run once this stage is done, in program order."""


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

    A function without collectives is one stage. A stage with no ops (a
    collective of an argument) is kept, empty, so stage ``s`` is always
    followed by the collectives that stage ``s + 1`` reads.
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
    later: list[set[SSAValue]] = [set(returned) for _ in range(count)]
    for s in range(count - 1, 0, -1):
        read = set(outside_operands(groups[s]))
        read |= {r.input for r in reduces[s]}
        later[s - 1] = later[s] | read
    stages = []
    for s, ops in enumerate(groups):
        needed = later[s] | {r.input for r in reduces[s]}
        made = [r for op in ops for r in op.results if r in needed]
        name = f"{fn.sym_name.data}_stage{s}"
        stages.append(
            Stage(_function(name, ops, made), outside_operands(ops), made, reduces[s])
        )
    return Staged(list(fn.args), stages, returned)


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
