"""What the Triton printer knows of a value, and how it moves register tiles.

Every value of a kernel is a register tensor of its padded shape. A
:class:`Value` names it and says what its padded lanes hold
(:class:`Padding`): a sum over a padded dim reads them, so padding that is not
zero must be masked away first. The functions here print the ``tl.arange``
index expressions, masks and offsets of padded tiles; :class:`TileKernel`, the
base of the kernel printer, holds the values and prints the masking,
collapsing and broadcasting every op printer needs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from itertools import count

from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import Phase, phases_of
from mirage_xdsl.ir.diagnostics import OpVerifyError
from mirage_xdsl.lowering.triton_buffers import KernelBody
from mirage_xdsl.lowering.triton_legalize import TILE_ATTR


class Padding(enum.Enum):
    """What the padded lanes of a value hold."""

    ZERO = "zero"
    """Zero in every padded lane (the value is *clean*): loads, and what a
    zero-preserving op makes of clean values."""
    ANY = "any"
    """Anything: masked to zero before a sum over a padded dim reads it."""

    @staticmethod
    def zero_if(clean: bool) -> Padding:
        """``ZERO`` when ``clean``, else ``ANY``."""
        return Padding.ZERO if clean else Padding.ANY


@dataclass(frozen=True, kw_only=True)
class Value:
    """A value's Triton expression (a variable name) and what is known of it."""

    name: str
    real: tuple[int, ...]
    """The value's shape."""
    padded: tuple[int, ...]
    """The register tensor's shape: ``real`` with padded dims."""
    padding: Padding
    dtype: str
    """The µGraph element type (``f16``, ``bf16``, ``f32``)."""
    native: bool = False
    """Holds the tile's element type (a load), not fp32."""

    @property
    def clean(self) -> bool:
        """Zero in every padded lane."""
        return self.padding is Padding.ZERO

    @property
    def f32(self) -> str:
        """The value as an fp32 expression."""
        return f"{self.name}.to(tl.float32)" if self.native else self.name

    def computed(
        self,
        name: str,
        *,
        padded: tuple[int, ...] | None = None,
        padding: Padding | None = None,
    ) -> Value:
        """The fp32 value ``name`` made from this one: the same real shape and
        element type, and the same ``padded`` and ``padding`` unless given."""
        return replace(
            self,
            name=name,
            native=False,
            padded=self.padded if padded is None else padded,
            padding=self.padding if padding is None else padding,
        )


def float_literal(c: float) -> str:
    """A constant as a Python literal that reads back as exactly ``c`` (its
    ``repr``), in parentheses when negative so it binds inside any expression."""
    return f"({c!r})" if c < 0 else repr(c)


def shape_str(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


TRITON_DTYPES = {"f16": "tl.float16", "bf16": "tl.bfloat16", "f32": "tl.float32"}
"""Triton element types by the name of the element type (:func:`dtype_name`)."""


def dtype_name(value: SSAValue) -> str:
    return str(t.element_type(value))


def arange(extent: int, dim: int, rank: int) -> str:
    """``tl.arange`` along ``dim`` of a rank-``rank`` tensor."""
    base = f"tl.arange(0, {extent})"
    if rank == 1:
        return base
    return (
        base + "[" + ", ".join(":" if i == dim else "None" for i in range(rank)) + "]"
    )


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step *= s
    return tuple(reversed(strides))


def tile_offsets(
    full: tuple[int, ...],
    padded: tuple[int, ...],
    starts: list[list[str]],
    strides: tuple[int, ...] | None = None,
) -> str:
    """Row-major element offsets of a padded tile inside a tensor of shape
    ``full``; ``starts[d]`` are the terms of the tile's first index along ``d``.
    ``strides`` (default: ``full``'s row-major ones) are those of the tensor
    ``full`` is a window of."""
    rank = len(full)
    terms = []
    for d, stride in enumerate(strides or row_major_strides(full)):
        index = arange(padded[d], d, rank)
        if starts[d]:
            index = f"({' + '.join(starts[d])} + {index})"
        terms.append(index if stride == 1 else f"{index} * {stride}")
    return " + ".join(terms)


def scaled(name: str, factor: int) -> str:
    return name if factor == 1 else f"{name} * {factor}"


def valid_mask(real: tuple[int, ...], padded: tuple[int, ...]) -> str | None:
    """The mask of real lanes of a padded tile, or None when nothing is padded."""
    rank = len(real)
    terms = [
        f"({arange(p, d, rank)} < {r})"
        for d, (r, p) in enumerate(zip(real, padded, strict=True))
        if p > r
    ]
    return " & ".join(terms) if terms else None


class TileKernel:
    """A kernel being printed, value by value: its body's buffers, the
    :class:`Value` of each SSA value printed so far and fresh names, with the
    moves every op printer makes on register tiles (mask the padding,
    collapse a dim, broadcast, bind a result to its tile)."""

    def __init__(self, op: kernel.CustomizedOp) -> None:
        self.op = op
        self.grid = op.grid_dims
        self.forloop = op.forloop
        self.phases = phases_of(op)
        self.body = KernelBody()
        self.values: dict[SSAValue, Value] = {}
        self.early = False
        """Whether the op being printed runs before the wait."""
        self._names = count(1)

    def fresh(self, prefix: str) -> str:
        """A new variable name, ``prefix`` then a number unique in the kernel."""
        return f"{prefix}{next(self._names)}"

    def emit(self, phase: Phase, line: str) -> None:
        """Write ``line`` into the buffer of ``phase`` of the op being printed."""
        self.body.section(phase, self.early).writeline(line)

    def masked(self, v: Value, phase: Phase) -> Value:
        """``v`` with every padded lane zero (fp32)."""
        mask = valid_mask(v.real, v.padded)
        if v.clean or mask is None:
            return v
        name = self.fresh("m")
        self.emit(phase, f"{name} = tl.where({mask}, {v.f32}, 0.0)")
        return v.computed(name, padding=Padding.ZERO)

    def collapse(self, v: Value, dims: list[int], phase: Phase) -> Value:
        """Keep only index 0 along ``dims`` (real extent 1 held in a padded dim)."""
        rank = len(v.padded)
        x = v.f32
        padded = list(v.padded)
        for d in dims:
            name = self.fresh("c")
            self.emit(
                phase,
                f"{name} = tl.sum(tl.where({arange(padded[d], d, rank)} == 0, {x}, 0.0), "
                f"axis={d}, keep_dims=True)",
            )
            padded[d] = 1
            x = name
        return v.computed(x, padded=tuple(padded))

    def to_shape(self, v: Value, padded: tuple[int, ...], phase: Phase) -> Value:
        """``v`` as a tensor of shape ``padded`` (broadcast, or collapsed then
        broadcast where a real extent 1 sits in a longer padded dim)."""
        if v.padded == padded:
            return v
        shrink = [
            d
            for d, (a, b) in enumerate(zip(v.padded, padded, strict=True))
            if a != b and a != 1
        ]
        if shrink:
            assert all(v.real[d] == 1 for d in shrink), (v, padded)
            v = self.collapse(v, shrink, phase)
        if v.padded == padded:
            return v
        name = self.fresh("b")
        self.emit(phase, f"{name} = tl.broadcast_to({v.f32}, {shape_str(padded)})")
        grows = any(
            a == 1 and b > r for a, b, r in zip(v.padded, padded, v.real, strict=True)
        )
        return v.computed(
            name, padded=padded, padding=Padding.zero_if(v.clean and not grows)
        )

    def broadcastable(
        self, v: Value, real: tuple[int, ...], padded: tuple[int, ...], phase: Phase
    ) -> Value:
        """``v`` as an operand Triton broadcasts to a result of real shape
        ``real`` held in ``padded``: a dim where ``v`` has real extent 1 against
        a longer result is collapsed to extent 1 first, since its padding lanes
        hold zeros, not copies."""
        shrink = [
            d
            for d in range(len(padded))
            if v.padded[d] > 1 and (v.padded[d] != padded[d] or v.real[d] < real[d])
        ]
        return self.collapse(v, shrink, phase) if shrink else v

    @staticmethod
    def tile_of(op: Operation) -> tuple[int, ...]:
        """The padded shape of ``op``'s result (``legalize-for-triton``)."""
        attr = op.attributes.get(TILE_ATTR)
        if attr is None:
            raise OpVerifyError(
                op, f"'{op.name}' has no '{TILE_ATTR}'; run legalize-for-triton first"
            )
        return tuple(attr.get_values())  # type: ignore[attr-defined]

    def define(
        self,
        op: Operation,
        phase: Phase,
        expr: str,
        natural: tuple[int, ...],
        padding: Padding,
    ) -> None:
        """Bind op's result to ``expr`` (shape ``natural``), fitted to its tile."""
        result = op.results[0]
        padded = self.tile_of(op)
        real = t.tensor_shape(result)
        name = self.fresh("v")
        self.emit(phase, f"{name} = {expr}  # {op.name}")
        v = Value(
            name=name,
            real=real,
            padded=natural,
            padding=padding,
            dtype=dtype_name(result),
        )
        self.values[result] = self.to_shape(v, padded, phase)
