"""What a part's ``mirage::part`` op returns when its outputs share a buffer.

A searched program returns one token's slices of a result (the query and the
value of a fused q/k/v projection) as views of the one buffer its kernel
writes (``views.py``). The op Inductor calls may return no two tensors
sharing storage, so such outputs would each need a copy. Instead the op
returns the buffer once, and the glue graph takes each output from it with
``aten.slice`` and ``aten.reshape``, views Inductor reads in place: a
:class:`Returns` says which tensors the op returns (*slots*: program outputs
and constants) and how each output the part computes is taken from one.

A part that has fallen back to its torch ops still fills the same slots:
each output is copied into its window of a fresh buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.torch.nodes import torch_dtype
from mirage_xdsl.torch.part import MiragePart, unshared
from mirage_xdsl.torch.views import View, apply


@dataclass(frozen=True)
class Slot:
    """A tensor the op returns: the program's output or the part's constant
    number ``index``, of ``shape`` and ``dtype``."""

    source: str
    index: int
    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass(frozen=True)
class Returns:
    """The op's slots, and per output the part computes (in
    ``MiragePart.computed`` order) its slot and the views taking it, before
    the reshape to the output's shape and the conversion to its dtype."""

    slots: tuple[Slot, ...]
    taken: tuple[tuple[int, tuple[View, ...]], ...]


def returns_of(part: MiragePart) -> Returns | None:
    """The slots of ``part``'s op, where two of its computed outputs are views
    of one program output (each a view torch can take); None otherwise."""
    views = getattr(part.run, "views", None)
    if views is None:
        return None
    types = entry_function(part.run.module).function_type.outputs.data
    slots: list[Slot] = []
    taken: list[tuple[int, tuple[View, ...]]] = []
    for i in part.computed:
        o = part.outputs[i]
        if o.source == "program":
            source, steps = views[o.index].source, views[o.index].views
            ty = types[source]
            slot = Slot(
                "program",
                source,
                tuple(ty.get_shape()),  # type: ignore[attr-defined]
                torch_dtype(ty.element_type),  # type: ignore[attr-defined]
            )
        else:
            slot, steps = Slot("constant", o.index, o.shape, part.output_dtypes[i]), ()
        if slot not in slots:
            slots.append(slot)
        taken.append((slots.index(slot), steps))
    if len(slots) == len(taken) or not all(
        _is_view(slots[s].shape, steps, part.outputs[i].shape)
        for i, (s, steps) in zip(part.computed, taken, strict=True)
    ):
        return None
    return Returns(tuple(slots), tuple(taken))


def _is_view(shape: tuple[int, ...], steps: tuple[View, ...], out) -> bool:
    try:
        apply(torch.empty(shape, device="meta"), steps, strict=True).view(out)
    except RuntimeError:
        return False
    return True


def returned(
    part: MiragePart, plan: Returns, inputs: tuple[torch.Tensor, ...]
) -> list[torch.Tensor]:
    """The slots of one call of ``part``: from its program, or filled from
    its torch ops once it has fallen back."""
    return part.attempt(
        lambda: _from_program(part, plan, inputs),
        lambda: _from_torch(part, plan, inputs),
    )


def _from_program(
    part: MiragePart, plan: Returns, inputs: tuple[torch.Tensor, ...]
) -> list[torch.Tensor]:
    raw = part.run.raw(*part.arguments(inputs))
    device = part.device_of(inputs)
    return unshared(
        [
            (raw[s.index], False)
            if s.source == "program"
            else (part.constants[s.index].to(device, s.dtype), True)
            for s in plan.slots
        ],
        inputs,
    )


def _from_torch(
    part: MiragePart, plan: Returns, inputs: tuple[torch.Tensor, ...]
) -> list[torch.Tensor]:
    out = part.fallback(*inputs)
    device = part.device_of(inputs)
    slots = [torch.empty(s.shape, dtype=s.dtype, device=device) for s in plan.slots]
    for i, (s, steps) in zip(part.computed, plan.taken, strict=True):
        window = apply(slots[s], steps, strict=True)
        window.copy_(out[i].reshape(window.shape))
    return slots
