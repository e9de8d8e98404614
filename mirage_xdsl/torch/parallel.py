"""Megatron-style tensor parallelism for torch modules.

:func:`tensor_parallel` splits a module's linear layers over ``shards`` GPUs
the way Megatron-LM does, and captures the shard as a sharded program:

- a *column-parallel* layer (``colwise``: Llama's ``q_proj``, ``k_proj``,
  ``v_proj``, ``gate_proj``, ``up_proj``) keeps the ``r``-th piece of its
  output features on shard ``r``: attention heads, or MLP columns;
- a *row-parallel* layer (``rowwise``: ``o_proj``, ``down_proj``) keeps the
  matching piece of its input features and sums its partial products over the
  shards (``mirage::all_reduce``, captured as ``kernel.all_reduce``); a bias is
  added once, after the sum.

So each block (attention, MLP) has one all-reduce. The plan maps linear
layers (their qualified names, ``fnmatch`` patterns) to ``colwise`` or
``rowwise``; the default, :data:`LLAMA_PLAN`, names Llama's layers as Hugging
Face's ``base_model_tp_plan`` does. A module must read head counts off its
tensors (``view(b, -1, 1, d)``), as Hugging Face's Llama does, so the split
layers give each shard its heads.

Every shard captures to the same program (else the capture is refused). The
placement of each program input (a user input is placed as
``input_placements`` says; a parameter, held by each shard as captured, is
found to be a replicated copy, a split or a joined split of the unsharded
program's: :mod:`.placements`) and of each output (by its shape) make it a
:class:`~mirage_xdsl.semantics.sharding.ShardedProgram`, which
:meth:`TensorParallel.verify` proves equal to the unsharded capture.
A module already sharded with ``torch.distributed.tensor`` is taken by
:func:`~mirage_xdsl.torch.dtensor.from_dtensor`.
"""

from __future__ import annotations

import copy
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import fx, nn
from torch.utils._pytree import tree_unflatten
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.semantics.sharding import (
    REPLICATE,
    Placement,
    Shard,
    ShardedProgram,
    ShardingError,
    piece,
    run_sharded,
)
from mirage_xdsl.torch.capture import Captured, capture_program
from mirage_xdsl.torch.function import search
from mirage_xdsl.torch.nodes import CaptureError
from mirage_xdsl.torch.placements import (
    Joined,
    output_placement,
    parameter_placement,
    regroup,
)
from mirage_xdsl.torch.rules import ATEN_RULES
from mirage_xdsl.verify.equivalence import Verdict
from mirage_xdsl.verify.sharded import equivalent_sharded

COLWISE, ROWWISE = "colwise", "rowwise"
LLAMA_PLAN = {
    **dict.fromkeys(
        ("*q_proj", "*k_proj", "*v_proj", "*gate_proj", "*up_proj"), COLWISE
    ),
    **dict.fromkeys(("*o_proj", "*down_proj"), ROWWISE),
}
"""Llama's linear layers by name, as Hugging Face's tensor-parallel plan has them."""


@torch.library.custom_op("mirage::all_reduce", mutates_args=())
def all_reduce(x: torch.Tensor, shards: int) -> torch.Tensor:
    """The sum of ``x`` over the ``shards`` processes of the default
    ``torch.distributed`` group (a new tensor)."""
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() != shards:
        raise MirageError(
            f"error: mirage::all_reduce sums over {shards} shards; it runs in a "
            f"torch.distributed group of {shards} processes"
        )
    out = x.clone()
    dist.all_reduce(out)
    return out


@all_reduce.register_fake
def _(x: torch.Tensor, shards: int) -> torch.Tensor:
    return torch.empty_like(x)


def _capture_all_reduce(c: Any, node: fx.Node, x: Any, shards: int) -> Any:
    """``mirage::all_reduce`` is ``kernel.all_reduce``."""
    return c.graph.all_reduce(c.value(x), shards)


ATEN_RULES[torch.ops.mirage.all_reduce] = _capture_all_reduce


class PlanMismatch(MirageError):
    """A module whose shards, split by a plan, do not run: a column-parallel
    layer whose outputs no row-parallel layer reads, say. ``shard`` is the
    shard whose capture failed, ``reason`` why."""

    def __init__(self, message: str, shard: int, reason: str):
        super().__init__(message)
        self.shard, self.reason = shard, reason


class RowParallelLinear(nn.Module):
    """A shard's piece of a row-parallel linear layer: its input features'
    piece, the partial products summed over the shards, the bias after."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, shards: int):
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)
        self.shards = shards

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.mirage.all_reduce(F.linear(x, self.weight), self.shards)
        return y if self.bias is None else y + self.bias


def _split(tensor: torch.Tensor, dim: int, rank: int, shards: int) -> torch.Tensor:
    return piece(tensor.detach(), Shard(dim), rank, shards).clone()


def _style(name: str, plan: dict[str, str]) -> str | None:
    for pattern, style in plan.items():
        if fnmatch.fnmatchcase(name, pattern):
            if style not in (COLWISE, ROWWISE):
                raise MirageError(
                    f"error: plan entry '{pattern}': '{style}' is neither "
                    f"'{COLWISE}' nor '{ROWWISE}'"
                )
            return style
    return None


def shard_module(
    module: nn.Module, rank: int, shards: int, plan: dict[str, str] | None = None
) -> nn.Module:
    """Shard ``rank``'s copy of ``module``: each planned linear layer replaced
    by its piece (see the module docstring); everything else replicated."""
    plan = LLAMA_PLAN if plan is None else plan
    shard = copy.deepcopy(module)
    planned = 0
    for name, layer in list(shard.named_modules()):
        style = _style(name, plan)
        if style is None:
            continue
        if not isinstance(layer, nn.Linear):
            raise MirageError(
                f"error: '{name}' is planned {style} but is a "
                f"{type(layer).__name__}, not nn.Linear"
            )
        dim = 0 if style == COLWISE else 1
        if layer.weight.shape[dim] % shards:
            raise MirageError(
                f"error: '{name}' has {layer.weight.shape[dim]} "
                f"{'output' if dim == 0 else 'input'} features, not divisible "
                f"into {shards} shards"
            )
        weight = _split(layer.weight, dim, rank, shards)
        if style == COLWISE:
            bias = None if layer.bias is None else _split(layer.bias, 0, rank, shards)
            new: nn.Module = nn.Linear(
                weight.shape[1], weight.shape[0], bias is not None, dtype=weight.dtype
            )
            new.weight = nn.Parameter(weight, requires_grad=False)
            new.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)
        else:
            bias = None if layer.bias is None else layer.bias.detach().clone()
            new = RowParallelLinear(weight, bias, shards)
        parent, _, leaf = name.rpartition(".")
        setattr(shard.get_submodule(parent), leaf, new)
        planned += 1
    if not planned:
        raise MirageError(
            f"error: no linear layer of {type(module).__name__} matches the plan "
            f"{sorted(plan)}"
        )
    return shard


def _shapes(module: ModuleOp, outputs: bool = False) -> list[tuple[int, ...]]:
    ty = entry_function(module).function_type
    return [tuple(t.get_shape()) for t in (ty.outputs if outputs else ty.inputs)]  # type: ignore[attr-defined]


@dataclass
class TensorParallel:
    """A module split over ``shards`` GPUs: the sharded program, the unsharded
    capture it is proven against, and what each shard holds."""

    program: ShardedProgram
    reference: Captured
    """The unsharded module's capture (its parameters are the whole tensors)."""
    parameters: list[list[torch.Tensor]]
    """Each shard's parameter inputs, in the program's order."""
    modules: list[nn.Module]
    """Each shard's torch module (the plan applied), to run with torch.distributed."""
    user_inputs: tuple[Placement, ...]
    regrouped: Captured | None = None
    """The unsharded capture reading each parameter the capture joined from
    several layers shard-major (:mod:`.placements`), or None when none is:
    what the shards are proven equal to."""

    @property
    def shards(self) -> int:
        return self.program.shards

    def verify(self, **options: Any) -> Verdict:
        """Whether the shards together compute what the unsharded module
        does (finite-field fingerprints; options as ``equivalent_sharded``)."""
        return equivalent_sharded(self.program, self.unsharded.module, **options)

    @property
    def unsharded(self) -> Captured:
        """The unsharded program the shards compute, its parameters laid out
        as the shards' placements split them."""
        return self.regrouped or self.reference

    def superoptimize(self, **options: Any) -> TensorParallel:
        """The shard's program searched (``mirage_xdsl.superoptimize``: each
        segment between all-reduces in turn)."""
        found = search(self.program.module, **options)
        return replace(self, program=replace(self.program, module=found))

    def shard_inputs(self, rank: int, *inputs: torch.Tensor) -> list[torch.Tensor]:
        """Shard ``rank``'s program inputs: its pieces of the user's inputs,
        then its parameters."""
        pieces = [
            piece(x, p, rank, self.shards).contiguous()
            for x, p in zip(inputs, self.user_inputs, strict=True)
        ]
        return [*pieces, *self.parameters[rank]]

    def unflatten(self, outputs: Sequence[torch.Tensor]) -> Any:
        """Outputs in the structure the module returns."""
        return tree_unflatten(list(outputs), self.reference.out_spec)

    def __call__(self, *inputs: torch.Tensor) -> Any:
        """Every shard in this process, in the interpreter (exact fp32, on
        the CPU): the unsharded module's outputs, assembled from the shards'."""
        full = [*inputs, *self.unsharded.parameters]
        arrays = [x.detach().float().cpu().numpy() for x in full]
        outs = self.program.gather(run_sharded(self.program, arrays))
        dtype = inputs[0].dtype
        return self.unflatten(
            [
                torch.from_numpy(np.require(y, requirements=["C", "W"])).to(dtype)
                for y in outs
            ]
        )


def tensor_parallel(
    module: nn.Module,
    shards: int,
    example_inputs: Sequence[torch.Tensor],
    input_placements: Sequence[Placement] | None = None,
    plan: dict[str, str] | None = None,
) -> TensorParallel:
    """``module`` split over ``shards`` shards by ``plan`` and captured (see
    the module docstring). ``example_inputs`` are the unsharded inputs;
    ``input_placements`` say how each is split (default: replicated), e.g.
    ``Shard(1)`` for a ``[batch, kv_heads, keys, head_dim]`` cache."""
    placements = tuple(input_placements or (REPLICATE,) * len(example_inputs))
    if len(placements) != len(example_inputs):
        raise MirageError(
            f"error: {len(example_inputs)} example inputs but "
            f"{len(placements)} input placements"
        )
    reference = capture_program(module, example_inputs)
    modules = [shard_module(module, r, shards, plan) for r in range(shards)]
    captures: list[Captured] = []
    for r, shard in enumerate(modules):
        try:
            xs = [
                piece(x, p, r, shards)
                for x, p in zip(example_inputs, placements, strict=True)
            ]
        except (IndexError, ShardingError) as e:
            raise MirageError(
                f"error: input placements {list(map(str, placements))}: {e}"
            ) from None
        try:
            captures.append(capture_program(shard, xs))
        except CaptureError as e:  # the unsharded module was captured
            reason = str(e).split("error: ", 1)[-1]
            raise PlanMismatch(
                f"error: {type(module).__name__} split by the plan "
                f"{plan or LLAMA_PLAN} does not run on shard {r}: {reason}",
                r,
                reason,
            ) from None
    texts = {module_text(c.module) for c in captures}
    if len(texts) != 1:
        raise MirageError(
            "error: the shards capture to different programs; "
            "tensor parallelism needs one program for all"
        )
    user = len(example_inputs)
    if len(captures[0].parameters) != len(reference.parameters):
        raise MirageError(
            f"error: a shard reads {len(captures[0].parameters)} parameters, the "
            f"unsharded module {len(reference.parameters)}"
        )
    try:
        found = [
            parameter_placement(user + i, full, [c.parameters[i] for c in captures])
            for i, full in enumerate(reference.parameters)
        ]
        joined = {user + i: p for i, p in enumerate(found) if isinstance(p, Joined)}
        params = tuple(Shard(p.dim) if isinstance(p, Joined) else p for p in found)
        outputs = tuple(
            output_placement(i, f, s, shards)
            for i, (f, s) in enumerate(
                zip(
                    _shapes(reference.module, True),
                    _shapes(captures[0].module, True),
                    strict=True,
                )
            )
        )
        program = ShardedProgram(
            captures[0].module, shards, placements + params, outputs
        )
    except ShardingError as e:
        raise MirageError(f"error: {e}") from None
    regrouped = regroup(reference, joined, shards) if joined else None
    return TensorParallel(
        program,
        reference,
        [c.parameters for c in captures],
        modules,
        placements,
        regrouped,
    )


__all__ = [
    "COLWISE",
    "LLAMA_PLAN",
    "ROWWISE",
    "PlanMismatch",
    "RowParallelLinear",
    "TensorParallel",
    "all_reduce",
    "shard_module",
    "tensor_parallel",
]
