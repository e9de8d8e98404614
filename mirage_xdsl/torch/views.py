"""Returned slices as torch views of a kernel's output, not copy kernels.

A program that returns a slice of a value a kernel computes (a decode layer
returning the new token's key and value, cut from the joined q/k/v
projection) would launch a copy kernel per slice: a returned value needs a
buffer of its own, which a kernel writes. Torch has views, so the kernel's
whole result is returned instead and the slice (and any reshape after it) is
taken in torch, as ``narrow`` and ``view``: no copy, no launch.

:func:`returned_views` rewrites the program's returns and says how to take
each original output from the new ones; :func:`take` does it on tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from mirage_xdsl.dialects import kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.semantics.interpreter import entry_function

View = tuple[str, tuple[int, ...]]
"""``("slice", (dim, start, end))`` or ``("reshape", shape)``."""


@dataclass(frozen=True)
class Output:
    """An original output: the new output it is a view of, and the views, in
    the order they apply."""

    source: int
    views: tuple[View, ...] = ()


def returned_views(module: ModuleOp) -> tuple[ModuleOp, list[Output]]:
    """``module`` returning, for each output that is a chain of reshapes and
    slices (with a slice among them, each op read only by the next) of a value
    a kernel computes, that value instead; and how to take every original
    output from the new ones. A module with no such output is returned as it
    is, with identity outputs."""
    module = module.clone()
    fn = entry_function(module)
    ret = fn.body.block.last_op
    assert isinstance(ret, func.ReturnOp)
    returned: list[SSAValue] = []
    outputs: list[Output] = []
    dead: list[Operation] = []
    for value in ret.operands:
        root, chain = _chain(value, fn.body.block)
        if not any(isinstance(op, kernel.SliceOp) for op in chain):
            root, chain = value, []
        if root not in returned:
            returned.append(root)
        outputs.append(Output(returned.index(root), tuple(_view(op) for op in chain)))
        dead += chain
    if not dead:  # returned as it is: a value returned twice keeps both places
        return module, [Output(i, ()) for i in range(len(ret.operands))]
    ret.operands = returned
    for op in dict.fromkeys(reversed(dead)):  # the last of each chain first
        if not any(r.uses for r in op.results):
            fn.body.block.erase_op(op)
    fn.update_function_type()
    return module, outputs


def _chain(value: SSAValue, block: Block) -> tuple[SSAValue, list[Operation]]:
    """The value under a run of single-use reshapes and slices ending at
    ``value``, and those ops, first applied first; the run stops at a value a
    kernel computes (a function argument ends it with no run: returning an
    input's slice needs the copy)."""
    chain: list[Operation] = []
    while isinstance(value.owner, Operation) and _is_view(value.owner):
        op = value.owner
        if chain and not op.results[0].has_one_use():
            break
        chain.append(op)
        value = op.operands[0]
    if not isinstance(value.owner, Operation) or _is_view(value.owner):
        return value, []
    return value, chain[::-1]


def _is_view(op: Operation) -> bool:
    return isinstance(op, kernel.SliceOp) or (
        isinstance(op, t.TensorOp) and op.KIND == "reshape"
    )


def _view(op: Operation) -> View:
    if isinstance(op, kernel.SliceOp):
        return ("slice", op.window)
    return ("reshape", t.tensor_shape(op.results[0]))


def apply(x: torch.Tensor, steps: Sequence[View], strict: bool = False) -> torch.Tensor:
    """``x`` through ``steps``: ``narrow`` for a slice, ``reshape`` for a
    reshape (``view`` when ``strict``: a view or an error, never a copy)."""
    for kind, args in steps:
        if kind == "slice":
            dim, start, end = args
            x = x.narrow(dim, start, end - start)
        else:
            x = x.view(args) if strict else x.reshape(args)
    return x


def take(outs: Sequence[torch.Tensor], outputs: Sequence[Output]) -> list[torch.Tensor]:
    """The original outputs from the new ones: each a view where torch can
    make one."""
    return [apply(outs[o.source], o.views) for o in outputs]
