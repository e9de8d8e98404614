"""Dimension labels: which logical axis each tensor dimension stands for.

The generator partitions tensors across thread blocks and for-loop iterations.
Abstract expressions ignore indices, so on their own they cannot tell a grid
dimension that splits the key axis of both K and V (FlashDecoding) from one
that splits K's keys and V's head dim (nonsense). Labels close that gap
cheaply: a unification over the input program gives every dimension an *axis*
(``m``, ``k``, ``n`` of a matmul; the key axis of attention, ...), and the
generator only partitions, contracts and broadcasts along equal labels.

A label is a small tuple, so labels hash, sort and pickle:

- ``("a", i)``: axis ``i`` of the input program (size :attr:`Axes.sizes`);
- ``UNIT``: a dimension of size 1 (broadcast freely, never split);
- ``("s", token, inner)``: partial results of ``inner`` written side by side,
  one per block of a grid dimension that split axis ``token`` (the first kernel
  of a split-K / FlashDecoding pair); a later kernel loops over the parts;
- ``("c", lhs, rhs)``: a concatenation of two labels.

Partial tokens (``rules.Tensor.partial``) are axes and part tokens, and
:func:`shift` tokens: ``("m", token)`` marks a value taken relative to a
*part maximum*, the row maximum over one part of ``token`` (a block's share
of a split axis, or one for-loop iteration), as the online softmax and
FlashDecoding take it. The maximum itself carries the token, and so does
anything computed from ``exp(x - m)``: such a value is right only up to a
factor ``exp(-m)`` per part, which an accumulation weighted by
``exp(m - max(m))`` (``block.forloop_accum`` with a ``shift``) turns into the
row's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.ir import SSAValue

from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.union_find import UnionFind

Label = tuple
UNIT: Label = ("u",)


def axis(i: int) -> Label:
    return ("a", i)


def split(token: Label, inner: Label) -> Label:
    return ("s", token, inner)


def part_token(token: Label) -> Label:
    """The for-loop token that walks the parts of a ``split`` label."""
    return ("p", token)


def shift(token: Label) -> Label:
    """The partial token of values relative to the part maxima over ``token``."""
    return ("m", token)


def is_shift(token: Label) -> bool:
    return token[0] == "m"


def is_axis(label: Label) -> bool:
    return label[0] == "a"


def is_part(label: Label) -> bool:
    """Whether ``label`` is a :func:`part_token` (a loop over split parts)."""
    return label[0] == "p"


@dataclass(frozen=True)
class Axes:
    """The axes of an input program and the labels of its values."""

    sizes: dict[Label, int]
    labels: dict[SSAValue, tuple[Label, ...]]
    reduced: frozenset[Label]
    """Axes the program sums over (matmul contraction, reductions, RMSNorm):
    the only axes a for-loop may walk, since accumulation sums iterations."""
    constants: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()
    """The program's ops with a float constant, as ``(KIND, attrs)``: the only
    constants the generator uses (a search cannot invent ``0.125``)."""
    maxed: frozenset[Label] = frozenset()
    """Axes the program takes a row maximum over: the only axes whose part
    maxima (:func:`shift`) the generator takes."""


def _unify_trailing(
    uf: UnionFind, operand: SSAValue, result: SSAValue, dims: range
) -> None:
    """Unify ``operand``'s dims with the result's ``dims`` they line up with
    (numpy's alignment of the trailing dims) and do not broadcast."""
    shape, out = t.tensor_shape(operand), t.tensor_shape(result)
    offset = len(out) - len(shape)
    for d in dims:
        if d >= offset and shape[d - offset] == out[d]:
            uf.union((operand, d - offset), (result, d))


def analyse(function: func.FuncOp) -> Axes:
    """Unify dimensions across the ops of a kernel-level function."""
    uf = UnionFind()
    reduced_nodes: list[tuple[SSAValue, int]] = []
    maxed_nodes: list[tuple[SSAValue, int]] = []
    values: list[SSAValue] = list(function.body.block.args)
    for op in function.body.block.ops:
        if not isinstance(op, t.TensorOp):
            continue
        result = op.results[0]
        values.append(result)
        out = t.tensor_shape(result)
        kind = op.KIND
        if kind == "matmul":
            lhs, rhs = op.operands
            rank = len(out)
            for operand in (lhs, rhs):
                _unify_trailing(uf, operand, result, range(rank - 2))
            lr, rr = len(t.tensor_shape(lhs)), len(t.tensor_shape(rhs))
            uf.union((lhs, lr - 2), (result, rank - 2))
            uf.union((rhs, rr - 1), (result, rank - 1))
            uf.union((lhs, lr - 1), (rhs, rr - 2))
            reduced_nodes.append((lhs, lr - 1))
        elif kind in t.REDUCE_KINDS:
            dim = op.dim.value.data  # type: ignore[attr-defined]
            for d in range(len(out)):
                if d != dim:
                    uf.union((op.operands[0], d), (result, d))
            if kind == "reduce_sum":
                reduced_nodes.append((op.operands[0], dim))
            elif kind == "reduce_max":
                maxed_nodes.append((op.operands[0], dim))
        else:
            for operand in op.operands:
                _unify_trailing(uf, operand, result, range(len(out)))
            if kind == "rms_norm":
                reduced_nodes.append((op.operands[0], len(out) - 1))
    roots: dict[object, Label] = {}
    sizes: dict[Label, int] = {}
    labels: dict[SSAValue, tuple[Label, ...]] = {}
    for v in values:
        dims: list[Label] = []
        for d, size in enumerate(t.tensor_shape(v)):
            if size == 1:
                dims.append(UNIT)
                continue
            root = uf.find((v, d))
            if root not in roots:
                roots[root] = axis(len(roots))
                sizes[roots[root]] = size
            dims.append(roots[root])
        labels[v] = tuple(dims)

    def found(nodes: list[tuple[SSAValue, int]]) -> frozenset[Label]:
        return frozenset(roots[uf.find(n)] for n in nodes if uf.find(n) in roots)

    return Axes(
        sizes,
        labels,
        found(reduced_nodes),
        constants_of(function),
        found(maxed_nodes),
    )


def constant_attrs(op: t.TensorOp) -> tuple[tuple[str, float], ...]:
    """An op's float constants as search attrs (``scalar``, or a nonzero
    ``eps``); empty for ops without one."""
    if isinstance(op, t.ScalarOp):
        return (("scalar", op.value),)
    if isinstance(op, t.RmsNormBase) and op.eps_value:
        return (("eps", op.eps_value),)
    return ()


def constants_of(function: func.FuncOp) -> tuple:
    """The distinct ``(KIND, attrs)`` of the ops in ``function`` that carry a
    float constant, in program order."""
    seen: dict[tuple, None] = {}
    for op in function.walk():
        if isinstance(op, t.TensorOp) and (attrs := constant_attrs(op)):
            seen[(op.KIND, attrs)] = None
    return tuple(seen)


def broadcast(
    lhs: tuple[Label, ...], rhs: tuple[Label, ...]
) -> tuple[Label, ...] | None:
    """Labels of an element-wise result, or None where dimensions disagree
    (a lower-rank operand lines up with the trailing dims)."""
    lhs, rhs = lift(lhs, len(rhs)), lift(rhs, len(lhs))
    out: list[Label] = []
    for a, b in zip(lhs, rhs, strict=True):
        if a == b or b == UNIT:
            out.append(a)
        elif a == UNIT:
            out.append(b)
        else:
            return None
    return tuple(out)


def matmul(lhs: tuple[Label, ...], rhs: tuple[Label, ...]) -> tuple[Label, ...] | None:
    """Labels of a matmul result, or None unless batch and contraction agree
    (batch dims broadcast as an element-wise op's do)."""
    if len(lhs) < 2 or len(rhs) < 2 or lhs[-1] != rhs[-2] or lhs[-1] == UNIT:
        return None
    batch = broadcast(lhs[:-2], rhs[:-2])
    if batch is None:
        return None
    return (*batch, lhs[-2], rhs[-1])


def lift(labels: tuple[Label, ...], rank: int) -> tuple[Label, ...]:
    """``labels`` with leading ``UNIT`` dims up to ``rank`` (numpy's alignment
    of a lower-rank tensor; ``block.input`` reads its tile so)."""
    return (UNIT,) * (rank - len(labels)) + tuple(labels)


def tokens_of(labels: tuple[Label, ...]) -> set[Label]:
    """Axes (and split parts) a tensor's dimensions carry."""
    out: set[Label] = set()
    for label in labels:
        if is_axis(label):
            out.add(label)
        elif label[0] == "s":
            out.add(part_token(label[1]))
    return out
