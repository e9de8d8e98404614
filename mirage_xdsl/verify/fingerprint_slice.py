"""Which residues the fingerprint needs: Z_q behind exp and sqrt arguments,
Z_p wherever something other than an exponent reads it.

A fingerprint's Z_q component is only ever read by ``exp`` (as the exponent;
also inside every op whose field formula takes an exp, such as ``silu``) and by
``sqrt`` and the other keyed random functions (the op table's ``KEYED`` ops,
and ``reduce_max`` per row: hashed with the Z_p component). Computing it for
every value doubles the verifier's work; :func:`residue_slice` finds the entry
arguments some exp or sqrt argument depends on, so only those are drawn with a
Z_q residue and everything else is computed mod p alone (``finite_field.py``
keeps a value's Z_q component exactly when all its operands have one). It
also says whether any exp or sqrt argument depends on an exp result (an op's
own formula may nest them: softplus is the log of ``1 + exp(x)``), the only
case in which exp results must carry a Z_q component too.

Conversely, :func:`exponent_only_ops` finds the ring operations whose results
are read only as exponents (attention's scores, which feed nothing but
``exp``); their Z_p residues are never read and are not computed.

The forward walk over-approximates where it is cheap to: the results of an op
with regions (a ``kernel.customized`` µGraph, a thread graph) depend on all its
operands, and every op but a ring operation or ``exp`` reads both components.
Over-approximation only costs time; a missing component would be caught
(``exp`` refuses an argument without its Z_q component, and arithmetic on a
missing Z_p component fails).

What an element-wise op reads is read off its op-table field formula, written
down as a term (:class:`_Terms`): the steps it takes, and whether its operand
is only ever an exponent.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import block
from mirage_xdsl.ops import OPS, Form, elementwise_kinds
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.verify.finite_field import ROW_KEYED_KINDS

Term = tuple[Any, ...] | str
"""A field formula written down: ``(step, *arguments)``, or an operand name."""


class _Terms:
    """The finite field's steps (an :class:`~mirage_xdsl.ops.Arith`) as terms."""

    def const(self, c: float, like: Term) -> Term:
        return ("const",)

    def add(self, x: Term, y: Term) -> Term:
        return ("add", x, y)

    def mul(self, x: Term, y: Term) -> Term:
        return ("mul", x, y)

    def div(self, x: Term, y: Term) -> Term:
        return ("div", x, y)

    def neg(self, x: Term) -> Term:
        return ("neg", x)

    def exp(self, x: Term) -> Term:
        return ("exp", x)

    def keyed(self, kind: str, x: Term) -> Term:
        return ("keyed", x)


OPERANDS = {Form.UNARY: ("x",), Form.SCALAR: ("x", 1.0), Form.BINARY: ("x", "y")}


def _term(kind: str) -> Term:
    """``kind``'s field formula on operands named ``x`` (and ``y``)."""
    spec = OPS[kind]
    return spec.field_apply(_Terms(), *OPERANDS[spec.form])


def _steps(term: Term) -> frozenset[str]:
    if isinstance(term, str):
        return frozenset()
    return frozenset({term[0]}).union(*(_steps(a) for a in term[1:]))


def _exponent_only(term: Term) -> bool:
    """Every operand of the formula is read as an exponent (exp's argument) alone."""
    if isinstance(term, str):
        return False
    if term[0] == "exp" and isinstance(term[1], str):
        return True
    return all(_exponent_only(a) for a in term[1:])


def _nests_exp(term: Term) -> bool:
    """The formula takes an exp or a hash of something an exp made
    (softplus: ``log(1 + exp(x))``, the log keyed)."""
    if isinstance(term, str):
        return False
    if term[0] in ("exp", "keyed") and "exp" in _steps(term[1]):
        return True
    return any(_nests_exp(a) for a in term[1:])


STEPS = {kind: _steps(_term(kind)) for kind in elementwise_kinds()}
"""The field steps each element-wise kind takes."""
NESTING_KINDS = frozenset(k for k in STEPS if _nests_exp(_term(k)))
"""Element-wise kinds whose own formula reads an exp result's Z_q residue, so
exp results must carry one (:attr:`ResidueSlice.nested`)."""
EXP = -1
"""The source marker of a value that depends on an exp result."""
EXP_KINDS = frozenset(k for k, steps in STEPS.items() if "exp" in steps)
"""Element-wise kinds whose field formula takes an exp."""
EXPONENT_KINDS = frozenset(k for k in STEPS if _exponent_only(_term(k)))
"""Element-wise kinds that read their operand only as an exponent (``exp``)."""
HASHED_KINDS = frozenset(k for k, steps in STEPS.items() if "keyed" in steps) | {
    *ROW_KEYED_KINDS,
    "rms_norm",
}
"""Kinds that hash their argument's (x_p, x_q) pairs (the keyed element-wise
ops element by element, ``ROW_KEYED_KINDS`` a whole row: ``reduce_max``)."""


@dataclass(frozen=True)
class ResidueSlice:
    inputs: frozenset[int]
    """Entry arguments whose Z_q residues an exp or sqrt argument reads."""
    nested: bool
    """Some exp or sqrt argument depends on an exp result."""

    def __or__(self, other: ResidueSlice) -> ResidueSlice:
        return ResidueSlice(self.inputs | other.inputs, self.nested or other.nested)


def _reads_q(op: Operation) -> bool:
    kind = getattr(op, "KIND", None)
    if kind in EXP_KINDS or kind in HASHED_KINDS:
        return True
    return isinstance(op, block.ForloopAccumOp) and op.reduction == "rms"


def _q_operands(op: Operation) -> tuple[SSAValue, ...]:
    """The operands whose Z_q residues ``op`` reads: the argument of an exp or
    a hash, and a shifted accumulation's shift (hashed to its maximum over
    the iterations, then an exponent)."""
    if isinstance(op, block.ForloopAccumOp) and op.shift is not None:
        return (op.shift,)
    return tuple(op.operands[:1]) if _reads_q(op) else ()


def _makes_exp(op: Operation) -> bool:
    return _makes_exp_here(op) or any(
        _makes_exp_here(inner) for region in op.regions for inner in region.walk()
    )


def _makes_exp_here(op: Operation) -> bool:
    return getattr(op, "KIND", None) in EXP_KINDS or (
        isinstance(op, block.ForloopAccumOp) and op.shift is not None
    )


def residue_slice(module: ModuleOp) -> ResidueSlice:
    """The inputs an exp/sqrt argument of ``module``'s entry function reads."""
    fn = entry_function(module)
    sources: dict[SSAValue, frozenset[int]] = {
        arg: frozenset({i}) for i, arg in enumerate(fn.args)
    }
    read: set[int] = set()
    for op in fn.walk():
        if op is fn:
            continue
        operand_sources = [sources.get(v, frozenset()) for v in op.operands]
        union = frozenset().union(*operand_sources)
        for value in _q_operands(op):
            read |= sources.get(value, frozenset())
        if getattr(op, "KIND", None) in NESTING_KINDS:
            read.add(EXP)
        for region in op.regions:
            for blk in region.blocks:
                positional = len(blk.args) == len(op.operands)
                for i, arg in enumerate(blk.args):
                    sources[arg] = operand_sources[i] if positional else union
        made = union | {EXP} if _makes_exp(op) else union
        for result in op.results:
            sources[result] = made
    return ResidueSlice(frozenset(i for i in read if i >= 0), EXP in read)


BOTH = frozenset({"p", "q"})
RING_STEPS = frozenset({"const", "add", "mul", "div", "neg"})
RING_KINDS = frozenset(k for k, steps in STEPS.items() if steps <= RING_STEPS) | {
    "matmul",
    "reduce_sum",
    "transpose",
    "reshape",
    "slice",
    "cast",
    "broadcast",
}
"""Ops computed component by component (the element-wise ones whose field
formula takes ring steps only; layouts move both alike), which can leave Z_p
out."""


def _reads(user: Operation, result_needs: frozenset[str]) -> frozenset[str]:
    """The components of an operand that ``user`` reads, given what is read of
    its results: exp reads only the exponent (Z_q); a hash (sqrt) reads both;
    ring operations read, per component, what their result needs. Anything
    else (block inputs and outputs, accumulations, returns) reads both."""
    kind = getattr(user, "KIND", None)
    if kind in EXPONENT_KINDS:
        return frozenset({"q"}) if result_needs else frozenset()
    if kind in RING_KINDS:
        return result_needs
    return BOTH


def exponent_only_ops(module: ModuleOp) -> frozenset[Operation]:
    """Arithmetic ops whose results are read only as exponents.

    Attention's scores ``Q·K`` feed nothing but ``exp``, which reads their Z_q
    residues alone: their Z_p residues (a second large matmul) are never read,
    so the verifier does not compute them. A backward walk: an op's results
    are needed in the components their users read.
    """
    needs: dict[SSAValue, frozenset[str]] = defaultdict(frozenset)
    fn = entry_function(module)
    skip: set[Operation] = set()
    for op in reversed(list(fn.walk())):
        if op is fn:
            continue
        result_needs = frozenset().union(*(needs[r] for r in op.results))
        if getattr(op, "KIND", None) in RING_KINDS and result_needs == {"q"}:
            skip.add(op)
        reads = _reads(op, result_needs)
        for value in op.operands:
            needs[value] = needs[value] | reads
    return frozenset(skip)
