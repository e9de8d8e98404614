"""Gradients through a µGraph: its backward runs the part again in torch.

A µGraph's kernels compute a forward only. A call that records gradients
(grad mode on and an input that requires them: a training step, or a
model called without ``torch.no_grad()``, whose weights require them) runs
the µGraph inside a ``torch.autograd.Function``: the forward is the
µGraph's, and the backward runs the part's own torch ops again on the
saved inputs and differentiates them, as activation checkpointing does. So
every weight a loss reaches through a part gets its gradient, where the
µGraph's outputs alone would have cut the graph, and a call that records
nothing costs nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

Run = Callable[..., Sequence[torch.Tensor]]


def records(inputs: Sequence[Any]) -> bool:
    """Whether a call on ``inputs`` records gradients."""
    return torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in inputs
    )


def differentiable(
    run: Run, torch_ops: Run, inputs: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, ...]:
    """``run(*inputs)`` with a backward through ``torch_ops`` (the same
    function as torch ops). ``run``'s outputs must be tensors of their own,
    neither views nor sharing storage with an input or each other: a caller
    may write them in place, which autograd refuses for a custom function's
    view."""
    return _Recompute.apply(run, torch_ops, *inputs)


class _Recompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, run: Run, torch_ops: Run, *inputs: torch.Tensor) -> Any:
        ctx.torch_ops = torch_ops
        ctx.save_for_backward(*inputs)
        outs = tuple(run(*inputs))
        ctx.mark_non_differentiable(*(o for o in outs if not o.is_floating_point()))
        return outs

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor | None) -> Any:
        wanted = ctx.needs_input_grad[2:]
        with torch.enable_grad():
            xs = [
                x.detach().requires_grad_(w)
                for x, w in zip(ctx.saved_tensors, wanted, strict=True)
            ]
            outs = ctx.torch_ops(*xs)
        pairs = [
            (o, g)
            for o, g in zip(outs, grads, strict=True)
            if g is not None and o.requires_grad
        ]
        sources = [x for x, w in zip(xs, wanted, strict=True) if w]
        found = (
            torch.autograd.grad(
                [o for o, _ in pairs],
                sources,
                [g for _, g in pairs],
                allow_unused=True,
            )
            if pairs and sources
            else [None] * len(sources)
        )
        each = iter(found)
        return (None, None, *(next(each) if w else None for w in wanted))
