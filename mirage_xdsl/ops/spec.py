"""What one op is, in every layer: the record each entry of the op table fills in.

An :class:`OpSpec` says once what an operation means, for every subsystem that
has to know: the dialects build their op classes from it, the interpreter's
domains compute with it, the verifier's finite field and its bound read its
field rule, the search reads its label rule and cost, the abstract expressions
its head, the code generators its Triton and CUDA C forms, the torch front end
its ATen names and the fuzzer its value intervals. Nothing here imports those
subsystems: each meaning is data, or a function written against a small
protocol the subsystem supplies (:class:`Arith`), the way Inductor's op handlers
let one decomposition serve several backends.

Element-wise ops (:attr:`Form.UNARY`, :attr:`Form.SCALAR`, :attr:`Form.BINARY`)
are defined by the table alone: adding one is one :class:`OpSpec`. The other
forms (matmul, reductions, concatenation, layout changes, RMSNorm, the
for-loop accumulator) carry the same record for their name, arity, shape form
and cost, while their partition semantics live with the walker that needs them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class Form(enum.Enum):
    """The operand shape of an op, which fixes its operands, attributes and
    assembly format at every level (the bases in ``dialects/tensor_ops.py``)."""

    UNARY = "unary"
    """One tensor in, the same shape out, element by element."""
    SCALAR = "scalar"
    """One tensor and a float constant ``scalar`` in, element by element."""
    BINARY = "binary"
    """Two tensors in, broadcast against each other, element by element."""
    MATMUL = "matmul"
    REDUCTION = "reduction"
    """One tensor in, one ``dim`` reduced to size 1."""
    CONCAT = "concat"
    SLICE = "slice"
    """One tensor in, the elements ``[start, end)`` of one ``dim`` out."""
    BROADCAST = "broadcast"
    """One tensor in, stretched along size-1 (or missing leading) dims."""
    CAST = "cast"
    """One tensor in, the same values in another float element type."""
    TRANSPOSE = "transpose"
    RESHAPE = "reshape"
    NORM = "norm"
    """A row-wise normalisation over the last dim, with an optional ``eps``."""
    ACCUM = "accum"
    """The block level's for-loop accumulator."""


ELEMENTWISE = (Form.UNARY, Form.SCALAR, Form.BINARY)


class Arith(Protocol):
    """The arithmetic an op's formula is written against.

    Every subsystem that evaluates formulas (the finite field, its degree
    bound, the CUDA C builder) supplies these: its own values in, its own
    values out. ``keyed`` is a random function of its argument, one per
    ``kind``: the finite field's image of an op with no algebraic one.
    ``math`` applies one of the named functions of :data:`ops.MATH`.
    """

    def const(self, c: float, like: Any) -> Any: ...

    def add(self, x: Any, y: Any) -> Any: ...

    def mul(self, x: Any, y: Any) -> Any: ...

    def div(self, x: Any, y: Any) -> Any: ...

    def neg(self, x: Any) -> Any: ...

    def max(self, x: Any, y: Any) -> Any: ...

    def exp(self, x: Any) -> Any: ...

    def math(self, name: str, x: Any) -> Any: ...

    def keyed(self, kind: str, x: Any) -> Any: ...


Formula = Callable[..., Any]
"""``f(arith, *operands)`` or, for :attr:`Form.SCALAR`, ``f(arith, x, c)``."""

KEYED: Formula = lambda arith, x, kind=None: arith.keyed(kind, x)  # noqa: E731
"""The field rule of an op with no algebraic image: a keyed random function
(:meth:`OpSpec.field_apply` passes the op's kind)."""

Interval = Callable[..., tuple[float, float]]
"""The fuzzer's value interval of the result from the operands' (positive)
intervals: ``(lo, hi) -> (lo, hi)``, with ``c`` after them for a scalar op and
both operands' ends for a binary one."""


@dataclass(frozen=True)
class MathFn:
    """A named scalar function the GPU backends call: how each spells it."""

    name: str
    xdsl_op: str
    """The op class in ``xdsl.dialects.math`` the CUDA C path builds."""
    c: str
    """The CUDA C function (fp32)."""
    real: Callable[[Any], Any]
    """Its numpy meaning, for the GPU IR's emulator."""


@dataclass(frozen=True)
class OpSpec:
    """One op, once: what each layer needs to know about it."""

    kind: str
    """The name at every level: ``kernel.<kind>``, ``block.<kind>``, ..."""
    form: Form
    doc: str
    """One sentence: the op's meaning (the op classes' docstring)."""
    levels: tuple[str, ...] = ("kernel", "block", "thread")
    """The dialects that define it."""
    flops: int = 1
    """Floating-point work per element (the cost model; matmul counts its own)."""
    real: Callable[..., Any] | None = None
    """Element-wise meaning over numpy arrays: ``(x)``, ``(x, c)`` or ``(x, y)``."""
    field: Formula | None = None
    """Element-wise meaning in the finite field: a formula over :class:`Arith`,
    or :data:`KEYED` for an op with no algebraic image."""
    expr: Formula | None = None
    """Abstract-expression term over the pruning's term builders (``add``,
    ``mul``, ``const``); None: an uninterpreted head named ``kind``."""
    linear: bool = False
    """Linear in its operand (the search's label rules may pass a partial sum
    through it); otherwise the search treats it as non-linear."""
    zero_preserving: bool = False
    """Maps 0 to 0, so a padded tile's zero padding stays zero (Triton)."""
    triton: str | None = None
    """The fp32 Triton expression over ``{x}``, ``{y}`` and ``{c}``."""
    cuda: Formula | None = None
    """The fp32 per-element CUDA C computation, a formula over :class:`Arith`."""
    torch: tuple[str, ...] = ()
    """ATen overload packets captured as exactly this op (others, such as the
    forms an RMSNorm is written in, are patterns of the torch front end)."""
    interval: Interval | None = None
    """For the fuzzer; None: never drawn at random."""
    constants: tuple[float, ...] = ()
    """Constants the fuzzer draws for a :attr:`Form.SCALAR` op."""

    @property
    def elementwise(self) -> bool:
        return self.form in ELEMENTWISE

    @property
    def keyed(self) -> bool:
        """A random function in the finite field (no algebraic image)."""
        return self.field is KEYED

    @property
    def camel(self) -> str:
        """``gelu_erf`` -> ``GeluErf``: the stem of its op classes' names."""
        return "".join(part.title() for part in self.kind.split("_"))

    def field_apply(self, arith: Arith, *args: Any) -> Any:
        """Its finite-field image through ``arith``."""
        assert self.field is not None, self.kind
        if self.keyed:
            return arith.keyed(self.keyed_kind(*args[1:]), args[0])
        return self.field(arith, *args)

    def keyed_kind(self, *constant: float) -> str:
        """The name of its random function in the finite field: a keyed op
        with a constant gets one function per constant (``clamp_max(x, 1)``
        and ``clamp_max(x, 2)`` are different functions of ``x``)."""
        if self.form is Form.SCALAR and constant:
            return f"{self.kind}({float(constant[0])!r})"
        return self.kind

    def triton_expr(self, x: str, y: str = "", c: str = "") -> str:
        """Its Triton expression with the operands (and constant) filled in."""
        assert self.triton is not None, self.kind
        return self.triton.format(x=x, y=y, c=c)


def increasing(real: Callable[..., Any]) -> Interval:
    """The interval of a function increasing on positive arguments: the ends
    map to the ends (with the constant, for a scalar op)."""
    import numpy as np

    def interval(lo: float, hi: float, *c: float) -> tuple[float, float]:
        with np.errstate(all="ignore"):
            ends = real(np.array([lo, hi], dtype=np.float64), *c)
        return float(ends[0]), float(ends[1])

    return interval
