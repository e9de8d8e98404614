"""Abstract-expression terms: the heads, the hash-consed :class:`Expr`, its
constructors and its text form.

A term is built over the inputs from ``add``, ``mul``, ``div``, the unary heads
(``exp``, ``sqrt``, ``silu``, the activations: :data:`UNARY_HEADS`, from the op
table) and ``sum(k, x)`` ("x added up over k elements"); ``concat(dim, ...)``
is the one piecewise head (``mirage_xdsl.search.pruning.expr_piecewise``).

The program's own float constants (``mul_scalar``, ``add_scalar``,
``rms_norm``'s ``eps``) are kept, each as a variable of its own
(:func:`constant`): ``x * 0.125`` is ``mul(x, const_1_8)``. Treating a constant
as an unknown loses only identities that hold for particular values
(``x * 0.5 * 0.25 = x * 0.125``), never adds one, so pruning stays sound, and
two different constants are two different terms.
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from mirage_xdsl.ops import OPS, Form, elementwise_kinds

Shape = tuple[int, ...]

BUILT_HEADS = ("exp", "sqrt", "silu")
"""Heads with constructors of their own (:func:`exp`, :func:`sqrt`,
:func:`silu`), which RMSNorm and the loop accumulator build."""
UNARY_HEADS = (
    *BUILT_HEADS,
    *(
        kind
        for kind in elementwise_kinds()
        if OPS[kind].form is not Form.BINARY
        and OPS[kind].expr is None
        and kind not in BUILT_HEADS
    ),
    "max",
)
"""Uninterpreted unary heads: ``x ⊑ f(x)`` and nothing else is known of them.
Every one-operand element-wise op of the op table without an ``expr``
formula is one, under its kind (a constant it takes is dropped).
``max(x)`` is a row maximum (``reduce_max``); like a mean's count, the number
of elements maxed over is dropped.
``neg`` is one too: constants are opaque variables (:func:`constant`), so
``-1 · x`` would be ``mul(x, const_m1_1)`` and cancel no better."""
BINARY_HEADS = ("add", "mul", "div")
"""The interpreted heads: the axioms regroup and distribute them."""
HEADS = ("var", "sum", "concat", *UNARY_HEADS, *BINARY_HEADS)


_LIVE: weakref.WeakValueDictionary[tuple, Expr] = weakref.WeakValueDictionary()
"""Every live term by (head, args, param): see :meth:`Expr.__new__`."""


class Expr:
    """An immutable, hashable abstract-expression term.

    ``head`` is one of :data:`HEADS`; ``args`` the sub-terms; ``param`` the
    variable name (``var``), the number of summed elements (``sum``) or
    ``(dim, sizes)`` (``concat``, ``dim`` negative, one size per piece).
    """

    __slots__ = ("head", "args", "param", "_hash", "_variables", "__weakref__")

    head: str
    args: tuple[Expr, ...]
    param: Any

    def __new__(cls, head: str, args: Sequence[Expr] = (), param: Any = None) -> Expr:
        """The one live term of this head, arguments and parameter.

        Terms are hash-consed: building a term equal to a live one returns
        that one, so equal terms are identical, equality is an identity test
        (the search compares and looks up millions of terms), and the
        arguments of a new term, interned themselves, hash and compare in
        constant time."""
        args = tuple(args)
        key = (head, args, param)
        live = _LIVE.get(key)
        if live is not None:
            return live
        assert head in HEADS, head
        self = object.__new__(cls)
        object.__setattr__(self, "head", head)
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "param", param)
        object.__setattr__(self, "_hash", hash(key))
        _LIVE[key] = self
        return self

    def __reduce__(self) -> tuple:
        """Rebuilt through ``Expr(...)``, so a term sent to another process
        is interned there too."""
        return (Expr, (self.head, self.args, self.param))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Expr is immutable")

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return (
            isinstance(other, Expr)
            and self._hash == other._hash
            and self.head == other.head
            and self.param == other.param
            and self.args == other.args
        )

    def __repr__(self) -> str:
        return f"Expr({str(self)!r})"

    def __str__(self) -> str:
        if self.head == "var":
            return str(self.param)
        if self.head == "sum":
            return f"sum({self.param}, {self.args[0]})"
        if self.head == "concat":
            dim, sizes = self.param
            parts = ", ".join(
                f"{s}: {a}" for s, a in zip(sizes, self.args, strict=True)
            )
            return f"concat[{dim}]({parts})"
        return f"{self.head}({', '.join(map(str, self.args))})"

    @staticmethod
    def parse(text: str) -> Expr:
        """Read a term written as :meth:`__str__` prints it (not concat)."""
        return _Parser(text).parse()

    def variables(self) -> frozenset[str]:
        """The variables the term reads, kept on the term after the first
        call: the generator asks for them for every kernel it might add."""
        try:
            return self._variables
        except AttributeError:
            pass
        if self.head == "var":
            found = frozenset([self.param])
        else:
            found = frozenset().union(*(a.variables() for a in self.args))
        object.__setattr__(self, "_variables", found)
        return found


# --- constructors ---------------------------------------------------------------


def var(name: str) -> Expr:
    return Expr("var", (), name)


def constant(c: float) -> Expr:
    """A float constant as a variable named by its exact rational value.

    ``0.125`` is ``const_1_8``, ``-1.5`` is ``const_m3_2``: equal floats give
    the same variable, different ones different variables, and the name
    parses back as an identifier.
    """
    num, den = float(c).as_integer_ratio()
    sign = "m" if num < 0 else ""
    return var(f"const_{sign}{abs(num)}_{den}")


def add(x: Expr, y: Expr) -> Expr:
    return Expr("add", (x, y))


def mul(x: Expr, y: Expr) -> Expr:
    return Expr("mul", (x, y))


def div(x: Expr, y: Expr) -> Expr:
    return Expr("div", (x, y))


def exp(x: Expr) -> Expr:
    return Expr("exp", (x,))


def sqrt(x: Expr) -> Expr:
    return Expr("sqrt", (x,))


def silu(x: Expr) -> Expr:
    return Expr("silu", (x,))


def unary_head(head: str) -> Callable[[Expr], Expr]:
    """The constructor of an uninterpreted unary head (one of :data:`UNARY_HEADS`)."""
    assert head in UNARY_HEADS, head
    return lambda x: Expr(head, (x,))


def sum_(k: int, x: Expr) -> Expr:
    """``sum(k, x)``; ``sum(1, x)`` is ``x`` itself (an axiom)."""
    if k < 1:
        raise ValueError(f"sum over {k} elements")
    return x if k == 1 else Expr("sum", (x,), k)


def concat(dim: int, pieces: Sequence[tuple[int, Expr]]) -> Expr:
    """Piecewise term along ``dim`` (negative): ``(size, piece)`` in order.

    Nested concats along the same dim are flattened and equal neighbours
    merged, so a concat whose pieces all agree is just that piece.
    """
    assert dim < 0, "concat dims are counted from the end"
    flat: list[tuple[int, Expr]] = []
    for size, piece in pieces:
        if piece.head == "concat" and piece.param[0] == dim:
            flat.extend(zip(piece.param[1], piece.args, strict=True))
        else:
            flat.append((size, piece))
    merged: list[tuple[int, Expr]] = []
    for size, piece in flat:
        if merged and merged[-1][1] == piece:
            merged[-1] = (merged[-1][0] + size, piece)
        else:
            merged.append((size, piece))
    if len(merged) == 1:
        return merged[0][1]
    return Expr("concat", [p for _, p in merged], (dim, tuple(s for s, _ in merged)))


def pieces(e: Expr) -> list[Expr]:
    """The non-concat terms a (possibly piecewise) term is made of."""
    if e.head != "concat":
        return [e]
    return [p for a in e.args for p in pieces(a)]


@functools.lru_cache(maxsize=1 << 16)
def marks(e: Expr) -> frozenset[tuple[str, object]]:
    """The variables, uninterpreted heads and divisions anywhere in ``e``,
    nested concatenations included.

    No axiom removes any of them: the equivalences only regroup, distribute
    and merge sums, and a subexpression only drops context. Every piece of a
    concatenation lands in some element of the whole. So a term, piecewise or
    not, with a mark that no target has is no subexpression of any target;
    the one necessary condition that still holds where a concatenation sits
    under another op and the term has no normal form."""
    if e.head == "var":
        return frozenset({("var", e.param)})
    out: set[tuple[str, object]] = set()
    if e.head in UNARY_HEADS or e.head == "div":
        out.add(("head", e.head))
    for a in e.args:
        out |= marks(a)
    return frozenset(out)


# --- parsing (tests, tools) -------------------------------------------------------


class _Parser:
    TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z_0-9.]*)|(.))")

    def __init__(self, text: str):
        self.tokens = [
            m.group(1) or m.group(2) or m.group(3)
            for m in self.TOKEN.finditer(text)
            if (m.group(1) or m.group(2) or m.group(3))
        ]
        self.pos = 0

    def next(self) -> str:
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def expect(self, tok: str) -> None:
        got = self.next()
        if got != tok:
            raise ValueError(f"expected '{tok}', got '{got}'")

    def parse(self) -> Expr:
        e = self.term()
        if self.pos != len(self.tokens):
            raise ValueError(f"trailing input at token {self.pos}")
        return e

    def term(self) -> Expr:
        name = self.next()
        if self.pos < len(self.tokens) and self.tokens[self.pos] == "(":
            self.expect("(")
            if name == "sum":
                k = int(self.next())
                self.expect(",")
                x = self.term()
                self.expect(")")
                return Expr("sum", (x,), k)
            args = [self.term()]
            while self.tokens[self.pos] == ",":
                self.expect(",")
                args.append(self.term())
            self.expect(")")
            return Expr(name, args)
        return var(name)
