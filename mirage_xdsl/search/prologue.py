"""Timing a segment as its program runs it: behind the input transposes it reads.

A segment is searched as a function of its own (``partition.py``), and a GPU
times its candidates that way. But a ``kernel.transpose`` of a program input
kept in front of a segment (attention's ``k.transpose(-1, -2)`` of the key
cache) is not a kernel of the compiled program: ``fold-transposes`` makes the
segment's kernels read the input transposed, in place, and that read is not
the contiguous one the segment alone would time. So each candidate is timed
with those transposes in front of it (:func:`with_prologue`), and the lowering
folds them as it will in the program; where it does not (a tile too narrow,
the CUDA C backend) the copy kernel is timed too, as it will run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Attribute, Block, BlockArgument, Region, SSAValue

from mirage_xdsl.dialects import kernel


@dataclass(frozen=True)
class Prologue:
    """Per segment argument that a program input's transpose feeds: its
    index, the swapped dims and the input's type."""

    transposes: tuple[tuple[int, tuple[int, int], Attribute], ...]

    def __str__(self) -> str:
        return ",".join(f"{i}:{a}-{b}" for i, (a, b), _ in self.transposes)


def reads_argument(op: object) -> TypeGuard[kernel.TransposeOp]:
    """A transpose of a function argument (an ``nn.Linear`` weight, a key
    cache): the Triton backend launches no kernel for it, its readers' loads
    take it in place (``fold-transposes``)."""
    return isinstance(op, kernel.TransposeOp) and isinstance(op.input, BlockArgument)


def prologue_of(inputs: Sequence[SSAValue]) -> Prologue | None:
    """The transposes of program inputs among a segment's ``inputs`` (the
    program's values its arguments hold), or None if there are none."""
    found = []
    for i, value in enumerate(inputs):
        op = value.owner
        if reads_argument(op):
            found.append((i, op.dims, op.input.type))
    return Prologue(tuple(found)) if found else None


def restricted(
    prologue: Prologue | None, inputs: Sequence[SSAValue]
) -> Prologue | None:
    """``prologue`` for a stage of its segment, whose arguments hold
    ``inputs`` (values of the segment's function)."""
    if prologue is None:
        return None
    by_arg = {i: (dims, ty) for i, dims, ty in prologue.transposes}
    found = [
        (j, *by_arg[v.index])
        for j, v in enumerate(inputs)
        if isinstance(v, BlockArgument) and v.index in by_arg
    ]
    return Prologue(tuple(found)) if found else None


def with_prologue(module: ModuleOp, prologue: Prologue) -> ModuleOp:
    """``module``'s function taking the transposed arguments' sources, and
    transposing them in front of its body."""
    fn = next(op for op in module.ops if isinstance(op, func.FuncOp))
    by_arg = {i: (dims, ty) for i, dims, ty in prologue.transposes}
    types = [by_arg[i][1] if i in by_arg else arg.type for i, arg in enumerate(fn.args)]
    body = Block(arg_types=types)
    mapping: dict[SSAValue, SSAValue] = {}
    for i, (old, new) in enumerate(zip(fn.args, body.args, strict=True)):
        if i in by_arg:
            swap = kernel.TransposeOp(new, *by_arg[i][0])
            body.add_op(swap)
            new = swap.result
        mapping[old] = new
    for op in fn.body.block.ops:
        body.add_op(op.clone(value_mapper=mapping))
    outputs = fn.function_type.outputs.data
    new_fn = func.FuncOp(
        fn.sym_name.data, FunctionType.from_lists(types, outputs), Region(body)
    )
    return ModuleOp([new_fn])


class ProloguedMeasure:
    """A search's ``measure`` timing each module behind ``prologue``; its
    key (under which measured picks are cached) names the prologue."""

    def __init__(self, measure: Any, prologue: Prologue):
        self.measure = measure
        self.prologue = prologue
        self._made: dict[int, tuple[ModuleOp, ModuleOp]] = {}
        """By ``id`` of a module: it and its prologued form, made once, so
        what ``prepare`` compiled ahead is what is timed."""

    def _behind(self, module: ModuleOp) -> ModuleOp:
        made = self._made.get(id(module))
        if made is None or made[0] is not module:
            made = (module, with_prologue(module, self.prologue))
            self._made[id(module)] = made
        return made[1]

    @property
    def key(self) -> str | None:
        key = getattr(self.measure, "key", None)
        return None if key is None else f"{key}:transposed-inputs[{self.prologue}]"

    def prepare(self, modules: Sequence[ModuleOp]) -> None:
        if prepare := getattr(self.measure, "prepare", None):
            prepare([self._behind(m) for m in modules])

    def __call__(self, module: ModuleOp) -> float:
        return self.measure(self._behind(module))

    def __getattr__(self, name: str) -> Any:  # describe, fallback, ...
        return getattr(self.measure, name)
