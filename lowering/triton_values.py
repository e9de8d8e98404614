"""What the Triton printer knows of a value, and the index text of its tiles.

Every value of a kernel is a register tensor of its padded shape. A
:class:`Value` names it and says what its padded lanes hold
(:class:`Padding`): a sum over a padded dim reads them, so padding that is not
zero must be masked away first. The functions below print the ``tl.arange``
index expressions, masks and offsets of padded tiles.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from xdsl.ir import SSAValue

from mirage_xdsl.dialects import tensor_ops as t


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
    full: tuple[int, ...], padded: tuple[int, ...], starts: list[list[str]]
) -> str:
    """Row-major element offsets of a padded tile inside a tensor of shape
    ``full``; ``starts[d]`` are the terms of the tile's first index along ``d``."""
    rank = len(full)
    terms = []
    for d, stride in enumerate(row_major_strides(full)):
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
