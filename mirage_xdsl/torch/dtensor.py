"""Tensor-parallel programs from modules sharded with ``torch.distributed.tensor``.

A module whose ``nn.Linear`` weights are DTensors, as
``parallelize_module(module, mesh, {"gate_proj": ColwiseParallel(), ...})``
or ``distribute_tensor`` leaves it, is taken as it is. :func:`from_dtensor`
reads each parameter's placement on its device mesh and maps it to
:func:`~mirage_xdsl.torch.parallel.tensor_parallel`'s plan:

| a linear layer's weight, bias | is |
| --- | --- |
| ``Shard(0)``, ``Shard(0)`` or none | ``colwise`` |
| ``Shard(1)``, ``Replicate()`` or none | ``rowwise`` |
| ``Replicate()``, ``Replicate()`` or none | replicated |

Any other parameter may be replicated, never sharded. A 2-d mesh, a
``Partial`` placement, a dim that does not split evenly over the mesh, a
weight and bias placed as no Megatron layer is, or sharded layers that do
not pair up (the split module does not run on a shard) are refused, naming
the parameters and their placements. The sharded module is then captured exactly as
``tensor_parallel`` captures an unsharded one (the same program, proven equal
to the unsharded module), from the whole tensors the ranks' pieces make.

DTensor's parallel styles also place the activations between layers
(``input_layouts``, ``output_layouts``); the program reads only the
parameters' placements and sums where Megatron does, once per row-parallel
layer, so its outputs are placed as :attr:`TensorParallel.program` says.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor import Replicate as TorchReplicate
from torch.distributed.tensor import Shard as TorchShard

from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.semantics.sharding import REPLICATE, Placement, Shard
from mirage_xdsl.torch.parallel import (
    COLWISE,
    ROWWISE,
    PlanMismatch,
    TensorParallel,
    tensor_parallel,
)

_STYLES = {
    (TorchShard(0), TorchShard(0)): COLWISE,
    (TorchShard(0), None): COLWISE,
    (TorchShard(1), TorchReplicate()): ROWWISE,
    (TorchShard(1), None): ROWWISE,
    (TorchReplicate(), TorchReplicate()): None,
    (TorchReplicate(), None): None,
}
"""A linear layer's (weight, bias) placements and the plan style they are."""


@dataclass
class DTensorParallel(TensorParallel):
    """A :class:`TensorParallel` made from a DTensor module, seen from one
    process: ``rank`` is its shard (its coordinate on the device mesh)."""

    rank: int = field(kw_only=True)

    def local_inputs(self, *inputs: torch.Tensor) -> list[torch.Tensor]:
        """This process's program inputs from what its sharded module takes
        (its pieces of the user's inputs, or DTensors), then its parameters,
        on the inputs' device."""
        local = [x.to_local() if isinstance(x, DTensor) else x for x in inputs]
        device = local[0].device
        params = [p.to(device) for p in self.parameters[self.rank]]
        return [*(x.contiguous() for x in local), *params]


def _placement_text(value: DTensor) -> str:
    return ", ".join(map(repr, value.placements))


def _normal(placement: Any, ndim: int) -> Any:
    """``Shard(-1)`` of a matrix is ``Shard(1)``."""
    if isinstance(placement, TorchShard) and placement.dim < 0:
        return TorchShard(placement.dim + ndim)
    return placement


def _check_tensor(name: str, value: DTensor, mesh: DeviceMesh | None) -> DeviceMesh:
    """Refuse a DTensor not on one 1-d mesh, partial, or split unevenly."""
    where = f"error: '{name}' is placed {_placement_text(value)}"
    if value.device_mesh.ndim != 1:
        raise MirageError(
            f"{where} on a {value.device_mesh.ndim}-d device mesh "
            f"{tuple(value.device_mesh.shape)}; only a 1-d mesh is taken"
        )
    if mesh is not None and value.device_mesh != mesh:
        raise MirageError(f"{where} on another device mesh than the first parameter's")
    (placement,) = value.placements
    if not isinstance(placement, (TorchShard, TorchReplicate)):
        raise MirageError(f"{where}: only Shard and Replicate placements are taken")
    placement = _normal(placement, value.dim())
    size, ranks = value.shape, value.device_mesh.size()
    if isinstance(placement, TorchShard) and size[placement.dim] % ranks:
        raise MirageError(
            f"{where}: its dim {placement.dim} ({size[placement.dim]}) does not "
            f"split evenly over {ranks} ranks"
        )
    return value.device_mesh


def _linear_style(name: str, layer: nn.Linear) -> str | None:
    """The plan style of a linear layer's placements, or a one-line error."""

    def placement(p: torch.Tensor | None) -> Any:
        if p is None:
            return None
        return (
            _normal(p.placements[0], p.dim())
            if isinstance(p, DTensor)
            else TorchReplicate()
        )

    pair = (placement(layer.weight), placement(layer.bias))
    if pair not in _STYLES:
        weight, bias = pair
        raise MirageError(
            f"error: '{name or type(layer).__name__}' has its weight placed "
            f"{weight!r} and its bias {bias!r}: a column-parallel layer is "
            "Shard(0), Shard(0); a row-parallel one Shard(1), Replicate()"
        )
    return _STYLES[pair]


def dtensor_plan(module: nn.Module) -> tuple[DeviceMesh, dict[str, str]]:
    """The device mesh of ``module``'s DTensors and the plan their placements
    are (each linear layer's qualified name to ``colwise`` / ``rowwise``);
    a placement no Megatron layer has is refused."""
    mesh: DeviceMesh | None = None
    linears = {id(m.weight) for m in module.modules() if isinstance(m, nn.Linear)}
    linears |= {
        id(m.bias)
        for m in module.modules()
        if isinstance(m, nn.Linear) and m.bias is not None
    }
    for name, value in [*module.named_parameters(), *module.named_buffers()]:
        if not isinstance(value, DTensor):
            continue
        mesh = _check_tensor(name, value, mesh)
        sharded = isinstance(value.placements[0], TorchShard)
        if sharded and id(value) not in linears:
            raise MirageError(
                f"error: '{name}' is placed {_placement_text(value)}; only an "
                "nn.Linear's weight and bias may be sharded"
            )
    if mesh is None:
        raise MirageError(
            f"error: no parameter of {type(module).__name__} is a DTensor"
        )
    plan = {}
    for name, layer in module.named_modules():
        if isinstance(layer, nn.Linear):
            style = _linear_style(name, layer)
            if style is not None:
                plan[name] = style
    return mesh, plan


def _whole(value: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a DTensor (gathered from every rank), on the CPU."""
    return value.full_tensor().detach().cpu()


def unsharded_copy(module: nn.Module) -> nn.Module:
    """A copy of ``module`` on the CPU with every DTensor parameter and buffer
    made whole (a collective: every rank calls it) and the hooks DTensor's
    parallel styles put on it removed."""
    memo: dict[int, Any] = {}
    for value in module.parameters():
        if isinstance(value, DTensor):
            memo[id(value)] = nn.Parameter(_whole(value), requires_grad=False)
    for value in module.buffers():
        if isinstance(value, DTensor):
            memo[id(value)] = _whole(value)
    whole = copy.deepcopy(module, memo).cpu()
    for m in whole.modules():
        for hooks in (m._forward_pre_hooks, m._forward_hooks):
            for key, hook in list(hooks.items()):
                if getattr(hook, "__module__", "").startswith("torch.distributed"):
                    del hooks[key]
    return whole


def _whole_inputs(
    inputs: Sequence[torch.Tensor],
    placements: Sequence[Placement],
    mesh: DeviceMesh,
) -> tuple[list[torch.Tensor], list[Placement]]:
    """The unsharded inputs and their placements from this rank's: a DTensor
    says its own; a plain tensor is this rank's piece as ``placements`` say."""
    wholes, places = [], []
    for i, (x, p) in enumerate(zip(inputs, placements, strict=True)):
        if isinstance(x, DTensor):
            _check_tensor(f"input #{i}", x, mesh)
            t = _normal(x.placements[0], x.dim())
            p = Shard(t.dim) if isinstance(t, TorchShard) else REPLICATE
            wholes.append(_whole(x))
        elif isinstance(p, Shard):
            local = DTensor.from_local(
                x.contiguous(), mesh, [TorchShard(p.dim)], run_check=False
            )
            wholes.append(_whole(local))
        else:
            wholes.append(x.detach().cpu())
        places.append(p)
    return wholes, places


def from_dtensor(
    module: nn.Module,
    example_inputs: Sequence[torch.Tensor],
    input_placements: Sequence[Placement] | None = None,
) -> DTensorParallel:
    """``module``, its linear layers sharded by DTensor, as a tensor-parallel
    program (see the module docstring). Every rank of the mesh calls it (it
    gathers the pieces). ``example_inputs`` are what this rank's module takes:
    DTensors, or plain tensors that are this rank's pieces as
    ``input_placements`` say (default: each whole, replicated), e.g.
    ``Shard(1)`` for a key/value cache split by heads."""
    mesh, plan = dtensor_plan(module)
    world = dist.get_world_size()
    if mesh.size() != world:
        raise MirageError(
            f"error: the device mesh has {mesh.size()} ranks but the process group "
            f"{world}; the mesh must span it"
        )
    placements = input_placements or [REPLICATE] * len(example_inputs)
    if len(placements) != len(example_inputs):
        raise MirageError(
            f"error: {len(example_inputs)} example inputs but "
            f"{len(placements)} input placements"
        )
    xs, places = _whole_inputs(example_inputs, placements, mesh)
    try:
        tp = tensor_parallel(unsharded_copy(module), mesh.size(), xs, places, plan)
    except PlanMismatch as e:
        raise MirageError(
            f"error: {_sharded_weights(module)} do not pair column- with "
            f"row-parallel layers as Megatron's split does: shard {e.shard} "
            f"does not run ({e.reason})"
        ) from None
    return DTensorParallel(**vars(tp), rank=mesh.get_local_rank())


def _sharded_weights(module: nn.Module, most: int = 4) -> str:
    """The sharded parameters and their placements, the first ``most``."""
    sharded = [
        f"'{name}' {_placement_text(p)}"
        for name, p in module.named_parameters()
        if isinstance(p, DTensor) and isinstance(p.placements[0], TorchShard)
    ]
    more = len(sharded) - most
    return ", ".join(sharded[:most]) + (f" and {more} more" if more > 0 else "")


__all__ = ["DTensorParallel", "dtensor_plan", "from_dtensor", "unsharded_copy"]
