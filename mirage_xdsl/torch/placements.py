"""How a shard's captured inputs relate to the unsharded capture's.

Every shard of a tensor-parallel module is captured, and so is the unsharded
module; the placement of each parameter input is found by comparing the
shards' copies with the unsharded one, and of each output by its shape:

- every shard's copy is the whole tensor: ``Replicate``;
- shard ``r``'s copy is the ``r``-th piece along one dim: ``Shard(dim)``;
- shard ``r``'s copy is the ``r``-th pieces of *several* consecutive
  segments along one dim, one after another: a *joined* parameter. The
  capture joins the weights of sibling linears of one input into one matmul
  (``rules/siblings.py``: Llama's q, k and v projections), so shard ``r``
  reads ``[q_r | k_r | v_r]`` where the unsharded program reads
  ``[q | k | v]``. That is ``Shard(dim)`` of the same values laid out
  shard-major, ``[q_0 k_0 v_0 | q_1 k_1 v_1]``: the unsharded program is
  *regrouped* to read that layout (slices of it concatenated back into
  ``[q | k | v]``, before anything else), and the shards are proven equal to
  it. Only the proof reads the regrouped program; the shards run their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from mirage_xdsl.dialects import kernel
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.semantics.sharding import REPLICATE, Placement, Shard, ShardingError
from mirage_xdsl.torch.capture import Captured


@dataclass(frozen=True)
class Joined:
    """A parameter whose shards hold pieces of ``len(widths)`` segments along
    ``dim``: ``widths`` are one shard's piece of each, in order."""

    dim: int
    widths: tuple[int, ...]


def _piece_shape(full: torch.Tensor, dim: int, shards: int) -> tuple[int, ...]:
    return tuple(s // shards if d == dim else s for d, s in enumerate(full.shape))


def _joined(
    full: torch.Tensor, pieces: Sequence[torch.Tensor], dim: int
) -> Joined | None:
    """The segments along ``dim`` that make ``pieces`` a joined split of
    ``full``, or None. Shard 0's piece of each segment starts where the
    segment does, so each segment ends at the first element where shard 0's
    copy and the unsharded tensor part."""
    shards, size = len(pieces), pieces[0].shape[dim]
    first, whole = pieces[0].movedim(dim, 0), full.movedim(dim, 0)
    widths: list[int] = []
    start = 0
    while start < size:
        span = size - start  # shard 0's piece of this segment, and the rest
        here = whole[shards * start : shards * start + span]
        agree = (first[start:] == here).reshape(span, -1).all(dim=1)
        width = span if agree.all() else int(agree.logical_not().nonzero()[0])
        if width == 0:
            return None
        widths.append(width)
        start += width
    joined = Joined(dim, tuple(widths))
    if len(widths) < 2 or not torch.equal(
        regrouped(full, joined, shards), torch.cat(list(pieces), dim)
    ):
        return None
    return joined


def regrouped(full: torch.Tensor, joined: Joined, shards: int) -> torch.Tensor:
    """``full`` laid out shard-major: each shard's pieces of every segment,
    shard after shard."""
    segments = full.split([w * shards for w in joined.widths], joined.dim)
    per_shard = [s.chunk(shards, joined.dim) for s in segments]
    return torch.cat([p[r] for r in range(shards) for p in per_shard], joined.dim)


def parameter_placement(
    index: int, full: torch.Tensor, pieces: Sequence[torch.Tensor]
) -> Placement | Joined:
    """How the shards' copies of a captured parameter relate to the
    unsharded one: all equal to it, its pieces along one dim, or joined."""
    shards = len(pieces)
    if all(p.shape == full.shape and torch.equal(p, full) for p in pieces):
        return REPLICATE
    for dim in range(full.dim()):
        if tuple(pieces[0].shape) != _piece_shape(full, dim, shards):
            continue
        if torch.equal(torch.cat(list(pieces), dim), full):
            return Shard(dim)
        joined = _joined(full, pieces, dim)
        if joined is not None:
            return joined
    raise ShardingError(
        f"parameter input #{index} {list(full.shape)}: the shards' copies "
        f"{[list(p.shape) for p in pieces]} are neither the whole tensor nor "
        "its pieces along one dim"
    )


def output_placement(
    index: int, full: Sequence[int], shard: Sequence[int], shards: int
) -> Placement:
    if tuple(full) == tuple(shard):
        return REPLICATE
    split = [d for d, (f, s) in enumerate(zip(full, shard, strict=True)) if f != s]
    if len(split) == 1 and full[split[0]] == shard[split[0]] * shards:
        return Shard(split[0])
    raise ShardingError(
        f"output #{index} is {list(shard)} on a shard and {list(full)} unsharded: "
        "not a piece along one dim"
    )


def _read_regrouped(value: BlockArgument, joined: Joined, shards: int) -> None:
    """Every reader of ``value`` reads its segments instead, rebuilt from its
    shard-major layout by slices and concatenations before the first op."""
    size = sum(joined.widths)
    parts: list[kernel.SliceOp] = []
    offset = 0
    for width in joined.widths:
        for r in range(shards):
            start = r * size + offset
            parts.append(kernel.SliceOp(value, joined.dim, start, start + width))
        offset += width
    ops: list[kernel.SliceOp | kernel.ConcatOp] = list(parts)
    result: SSAValue = parts[0].result
    for part in parts[1:]:
        ops.append(kernel.ConcatOp(result, part.result, joined.dim))
        result = ops[-1].result
    Rewriter.insert_op(ops, InsertPoint.at_start(value.block))
    inserted = set(ops)
    for use in list(value.uses):
        if use.operation not in inserted:
            use.operation.operands[use.index] = result


def regroup(reference: Captured, joined: dict[int, Joined], shards: int) -> Captured:
    """``reference`` reading each joined parameter (by program input index)
    shard-major: the program the shards are proven equal to."""
    module: ModuleOp = reference.module.clone()
    args = entry_function(module).body.block.args
    users = len(args) - len(reference.parameters)
    parameters = list(reference.parameters)
    for index, how in joined.items():
        _read_regrouped(args[index], how, shards)
        i = index - users
        parameters[i] = regrouped(parameters[i], how, shards)
    return Captured(module, parameters, reference.out_spec)
