"""Tensor-parallel programs: one program per shard, summed by ``kernel.all_reduce``.

A :class:`ShardedProgram` is the program each of ``shards`` GPUs runs (the same
µGraph on every shard: SPMD), with a :data:`Placement` for each input and
output saying how it relates to the unsharded program's:

- :class:`Replicate`: every shard holds the whole tensor;
- :class:`Shard` ``(dim)``: shard ``r`` holds the ``r``-th of ``shards`` equal,
  contiguous pieces along ``dim`` (a column-parallel weight, a key/value cache
  split by heads, an output each shard computes its heads of).

Its meaning is the shards run side by side: every ``kernel.all_reduce`` gives
every shard the sum of the shards' values. :func:`run_sharded` computes that
in one process, stage by stage (``ir/collectives.py``), in any value domain,
so the float reference and the verifier's finite field see the same
semantics; the GPU runtime (``runtime/distributed.py``) runs the same stages
with NCCL between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.dialects import kernel
from mirage_xdsl.ir.collectives import Staged, split_stages
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import parse
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.semantics.domain import Domain, FloatDomain
from mirage_xdsl.semantics.interpreter import entry_function, layout, run


@dataclass(frozen=True)
class Replicate:
    """Every shard holds the whole tensor."""

    def __str__(self) -> str:
        return "replicate"


@dataclass(frozen=True)
class Shard:
    """Shard ``r`` holds the ``r``-th equal contiguous piece along ``dim``."""

    dim: int

    def __str__(self) -> str:
        return f"shard({self.dim})"


Placement = Replicate | Shard
REPLICATE = Replicate()


class ShardingError(ValueError):
    """A sharded program, or inputs for it, that do not fit together."""


def shard_shape(
    shape: Sequence[int], placement: Placement, shards: int
) -> tuple[int, ...]:
    """The shape one shard holds of a tensor of ``shape``."""
    if isinstance(placement, Replicate):
        return tuple(shape)
    dim = placement.dim
    if not 0 <= dim < len(shape) or shape[dim] % shards:
        raise ShardingError(
            f"{list(shape)} cannot be split into {shards} equal pieces along dim {dim}"
        )
    return tuple(s // shards if d == dim else s for d, s in enumerate(shape))


def piece(value: Any, placement: Placement, rank: int, shards: int) -> Any:
    """Shard ``rank``'s piece of a whole tensor (an array or fingerprint)."""
    if isinstance(placement, Replicate):
        return value
    size = shard_shape(tuple(value.shape), placement, shards)[placement.dim]
    index = [slice(None)] * len(value.shape)
    index[placement.dim] = slice(rank * size, (rank + 1) * size)
    return value[tuple(index)]


@dataclass
class ShardedProgram:
    """One shard's program, how many shards run it, and how its inputs and
    outputs are placed relative to the unsharded program's."""

    module: ModuleOp
    shards: int
    inputs: tuple[Placement, ...]
    outputs: tuple[Placement, ...]

    def __post_init__(self) -> None:
        fn = entry_function(self.module)
        ins, outs = fn.function_type.inputs.data, fn.function_type.outputs.data
        for what, placements, types in (
            ("inputs", self.inputs, ins),
            ("outputs", self.outputs, outs),
        ):
            if len(placements) != len(types):
                raise ShardingError(
                    f"@{fn.sym_name.data} has {len(types)} {what} but "
                    f"{len(placements)} placements"
                )
        for op in fn.walk():
            if isinstance(op, kernel.AllReduceOp) and op.group_size != self.shards:
                raise ShardingError(
                    f"'{op.name}' sums over {op.group_size} shards in a program "
                    f"of {self.shards}"
                )

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its text, to be parsed again in another process (one
        per GPU)."""
        fields = (module_text(self.module), self.shards, self.inputs, self.outputs)
        return (_parsed, fields)

    def staged(self) -> Staged:
        return split_stages(entry_function(self.module))

    def shard_inputs(self, values: Sequence[Any], rank: int) -> list[Any]:
        """Shard ``rank``'s inputs from the unsharded program's."""
        if len(values) != len(self.inputs):
            raise ShardingError(
                f"expected {len(self.inputs)} inputs, got {len(values)}"
            )
        return [
            piece(v, p, rank, self.shards)
            for v, p in zip(values, self.inputs, strict=True)
        ]

    def mismatch(self, reference: ModuleOp) -> str | None:
        """Why this cannot be a sharding of ``reference`` (each input and
        output a piece of the unsharded one's, of its element type), or None."""
        mine, theirs = entry_function(self.module), entry_function(reference)
        pairs = (
            (
                "input",
                self.inputs,
                mine.function_type.inputs,
                theirs.function_type.inputs,
            ),
            (
                "output",
                self.outputs,
                mine.function_type.outputs,
                theirs.function_type.outputs,
            ),
        )
        for what, placements, shard_types, full_types in pairs:
            if len(shard_types) != len(full_types):
                return (
                    f"a shard has {len(shard_types)} {what}s, the unsharded "
                    f"program {len(full_types)}"
                )
            for i, (p, got, full) in enumerate(
                zip(placements, shard_types, full_types, strict=True)
            ):
                try:
                    want = shard_shape(full.get_shape(), p, self.shards)
                except ShardingError as e:
                    return f"{what} #{i}: {e}"
                if (tuple(got.get_shape()), got.element_type) != (
                    want,
                    full.element_type,
                ):
                    return (
                        f"{what} #{i} is {got} on a shard; {p} of {full} over "
                        f"{self.shards} shards is {list(want)} of {full.element_type}"
                    )
        return None

    def gather(self, per_shard: Sequence[Sequence[Any]]) -> list[Any]:
        """The unsharded outputs from every shard's: pieces concatenated
        along their dim, a replicated output taken from shard 0."""
        return [
            np.concatenate([outs[i] for outs in per_shard], axis=p.dim)
            if isinstance(p, Shard)
            else per_shard[0][i]
            for i, p in enumerate(self.outputs)
        ]


def _parsed(text: str, *fields: Any) -> ShardedProgram:
    return ShardedProgram(parse(make_context(), text, "<sharded program>"), *fields)


def run_stages(
    staged: Staged,
    inputs: Sequence[Sequence[Any]],
    domain: Domain,
) -> list[list[Any]]:
    """Every shard's outputs: each stage run on every shard, then each
    collective after it summed over the shards (in shard order, once, so every
    shard receives the very same sum)."""
    envs = [dict(zip(staged.arguments, xs, strict=True)) for xs in inputs]
    for stage in staged.stages:
        for env in envs:
            for view in stage.views:
                env[view.result] = layout(view, env[view.input])
            outs = run(stage.module, [env[v] for v in stage.inputs], domain)
            env.update(zip(stage.outputs, outs, strict=True))
        for op in stage.reduces:
            total = reduce(domain.add, (env[op.input] for env in envs))
            for env in envs:
                env[op.result] = total
    return [[env[v] for v in staged.results] for env in envs]


def run_sharded(
    program: ShardedProgram,
    inputs: Sequence[Any],
    domain: Domain | None = None,
) -> list[list[Any]]:
    """Every shard's outputs of ``program`` on the unsharded ``inputs`` (each
    shard gets its pieces), shard by shard: ``result[rank][i]``."""
    domain = domain or FloatDomain()
    loaded = [domain.load(x) for x in inputs]
    per_shard = [program.shard_inputs(loaded, r) for r in range(program.shards)]
    return run_stages(program.staged(), per_shard, domain)
