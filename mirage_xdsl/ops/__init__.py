"""The op table: each operation of the µGraph dialects declared once.

``OPS[kind]`` is the :class:`OpSpec` of an op kind; the helpers below select
kinds by form, in table order. See ``table.py`` for the entries and
``spec.py`` for what an entry says.
"""

from __future__ import annotations

from mirage_xdsl.ops.spec import (
    ELEMENTWISE,
    KEYED,
    Arith,
    Form,
    MathFn,
    OpSpec,
    increasing,
)
from mirage_xdsl.ops.table import MATH, OPS_IN_ORDER

OPS: dict[str, OpSpec] = {spec.kind: spec for spec in OPS_IN_ORDER}
"""Op kind -> its entry, in table order."""


def kinds(*forms: Form, level: str | None = None) -> tuple[str, ...]:
    """The kinds of the given forms (all forms when none), in table order;
    with ``level``, only those that ``level``'s dialect defines."""
    return tuple(
        s.kind
        for s in OPS_IN_ORDER
        if (not forms or s.form in forms) and (level is None or level in s.levels)
    )


def elementwise_kinds(level: str | None = None) -> tuple[str, ...]:
    """Every element-wise kind: unary, with a constant, and binary."""
    return kinds(*ELEMENTWISE, level=level)


__all__ = [
    "ELEMENTWISE",
    "KEYED",
    "MATH",
    "OPS",
    "OPS_IN_ORDER",
    "Arith",
    "Form",
    "MathFn",
    "OpSpec",
    "elementwise_kinds",
    "increasing",
    "kinds",
]
