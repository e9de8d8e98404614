"""What conversion rules pass around, and how they read their operands.

A rule returns a node's value: an SSA value, or one of the stand-ins here
(:class:`Partial`, :class:`Parameter`, :class:`MaxWithIndices`,
:class:`Expanded`, :class:`Pieces`, :class:`Empty`) that later rules combine or the converter
materialises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import fx
from xdsl.ir import Attribute, SSAValue

from mirage_xdsl.dialects import shapes
from mirage_xdsl.ir.builder import KernelGraph
from mirage_xdsl.torch.nodes import (
    unsupported,
)


@dataclass(frozen=True)
class Partial:
    """A torch value that exists in the kernel dialect only inside a fused op.

    ``kind`` is one of ``square`` (x^2), ``mean_square`` (mean of x^2 over the
    last dim), ``rms`` (its square root), ``inv_rms`` (its reciprocal square
    root) and ``sigmoid``; ``x`` is the value they are computed from and
    ``node`` the torch node that produced this piece, for error messages.
    ``eps`` is the constant added to ``mean(x^2)``, kept by the rms_norm.
    """

    kind: str
    x: SSAValue
    node: fx.Node
    eps: float = 0.0


@dataclass
class Parameter:
    """A module parameter or buffer: becomes a function input when first used."""

    tensor: torch.Tensor
    node: fx.Node
    value: SSAValue | None = None


@dataclass(frozen=True)
class Empty:
    """An empty slice (``q[..., rotary_dim:]`` when the rotary embedding spans
    the whole head): a concatenation drops it, and nothing else may read it."""

    node: fx.Node


@dataclass(frozen=True)
class MaxWithIndices:
    """The ``(values, indices)`` pair of ``torch.max(x, dim)``: only its values
    (``[0]``, ``.values``) have a kernel-dialect op, ``kernel.reduce_max``."""

    values: SSAValue
    node: fx.Node


@dataclass(frozen=True)
class MaskedScores:
    """``x.masked_fill(m, -inf)`` or ``torch.where(keep, x, -inf)``: scores
    whose masked entries a softmax weighs 0 (nanoGPT's causal mask). Only a
    softmax over the last dim reads it, as its exponentials times the 0/1
    ``keep`` mask; an infinite value has no other exact form."""

    x: SSAValue
    keep: SSAValue
    node: fx.Node


@dataclass(frozen=True)
class Expanded:
    """``x.expand(shape)`` of a computed tensor, possibly reshaped after
    (``reshape``): the kernel dialect broadcasts only inside element-wise ops,
    so it exists as a value only when materialised (``kernel.broadcast``); an
    attention reads grouped heads (``repeat_kv``) from ``x`` directly."""

    x: SSAValue
    shape: tuple[int, ...]
    node: fx.Node
    reshape: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Pieces:
    """The tensors of ``torch.split`` / ``chunk``: ``source`` cut along
    ``dim`` into ``ranges``, each sliced when ``operator.getitem`` reads it."""

    source: fx.Node
    dim: int
    ranges: tuple[range, ...]
    node: fx.Node


Value = (
    SSAValue | Partial | Parameter | MaxWithIndices | MaskedScores | Expanded | Pieces
)


class Converter(Protocol):
    """What a rule reads of the walk that calls it (:class:`mirage_xdsl.torch.capture.Converter`)."""

    graph: KernelGraph
    env: dict[fx.Node, Value]
    dtype: Attribute
    fused_linears: dict[fx.Node, Any]
    """Sibling linears' slices of their fused projection (:mod:`.siblings`)."""

    def value(self, node: fx.Node) -> SSAValue:
        """The SSA value of a converted node."""
        ...

    def constant(self, tensor: torch.Tensor) -> SSAValue:
        """A tensor computed at capture, passed in as a trailing input."""
        ...

    def transposed(self, node: fx.Node) -> SSAValue:
        """The transpose of a 2-d value."""
        ...

    def joinable(self, weight: Any, bias: Any) -> bool:
        """Whether a linear with this weight and bias may join a fused
        projection (``rules/siblings.py``)."""
        ...

    def joined(self, weights: list[fx.Node], biases: list[Any]) -> SSAValue:
        """The ``[in, sum of out]`` transposes of ``weights``, side by side."""
        ...

    def joined_bias(self, biases: list[fx.Node]) -> SSAValue:
        """The ``[sum of out]`` concatenation of ``biases``."""
        ...


Rule = Callable[..., Value]


def refuse_scalars(node: fx.Node, *args: Any) -> None:
    for a in args:
        if not isinstance(a, fx.Node):
            raise unsupported(
                node,
                f"scalar operand {a!r} here (constants exist only as x * c, "
                "x / c, x + c, x - c and c - x)",
            )


def as_number(a: Any) -> float | None:
    """A Python number operand as a float; None for tensors (and bools)."""
    if isinstance(a, int | float) and not isinstance(a, bool):
        return float(a)
    return None


def tensor_and_scalar(a: Any, b: Any, commutes: bool) -> tuple[Any, float] | None:
    """``(tensor node, constant)`` of ``x (op) c`` (or ``c (op) x`` when the op
    commutes); None when neither form applies."""
    if isinstance(a, fx.Node) and (c := as_number(b)) is not None:
        return a, c
    if commutes and isinstance(b, fx.Node) and (c := as_number(a)) is not None:
        return b, c
    return None


def tensor_operands(c: Converter, node: fx.Node, *args: Any) -> list[SSAValue]:
    """Materialised tensor operands; a Python number is refused here (the rules
    that accept constants match them first)."""
    refuse_scalars(node, *args)
    return [c.value(a) for a in args]


def check_shape(node: fx.Node, rule: Callable[..., Any], *shape_args: Any) -> None:
    try:
        rule(*shape_args)
    except shapes.ShapeError as e:
        raise unsupported(node, str(e)) from None


def partial_of(c: Converter, a: Any, *kinds: str) -> Partial | None:
    v = c.env.get(a) if isinstance(a, fx.Node) else None
    return v if isinstance(v, Partial) and v.kind in kinds else None


def is_x_of(c: Converter, a: Any, partial: Partial) -> bool:
    """Whether ``a`` is the value ``partial`` was computed from."""
    if not isinstance(a, fx.Node) or isinstance(c.env.get(a), Partial):
        return False
    return c.value(a) is partial.x


def parameter_of(c: Converter, a: Any) -> torch.Tensor | None:
    """The tensor of a module parameter or buffer operand, else None."""
    v = c.env.get(a) if isinstance(a, fx.Node) else None
    return v.tensor if isinstance(v, Parameter) else None


def materialise_expand(c: Converter, e: Expanded) -> SSAValue:
    """An :class:`Expanded` value as ops: ``kernel.broadcast`` to the expanded
    shape, reshaped after if it was."""
    y = c.graph.broadcast(e.x, e.shape)
    return c.graph.reshape(y, e.reshape) if e.reshape else y
