"""Abstract expressions: what a tensor computes, with the index details dropped.

Mirage prunes its µGraph search with *abstract expressions* (see
``docs/abstract_expressions.md``). Every tensor gets a term over the inputs
built from ``add``, ``mul``, ``div``, the unary heads (``exp``, ``sqrt``,
``silu``, the activations: :data:`UNARY_HEADS`, from the op table) and
``sum(k, x)`` ("x added up over k elements"): a matmul ``A·B`` with contraction
length 64 is ``sum(64, mul(A, B))``, wherever its tiles come from. A candidate
prefix survives only if each of its tensors' terms is a subexpression of the
target's under the axioms (``mirage_xdsl.search.pruning.subexpr_oracle``).

This module defines the terms (:class:`Expr`), the table that gives each op
``KIND`` its term from its operands' terms and shapes (:func:`op_expr`), and the
walk that labels every value of a program (:func:`exprs_of_function`).

Concatenation is the one op whose result is not uniform across its elements,
so it gets a *piecewise* term: ``concat(dim, [(size, piece), ...])`` records
which slice of the concatenated dim holds which piece. Every other op is
pushed through the pieces exactly (element-wise ops slice their operands at
the union of the piece boundaries, reductions over the concatenated dim add
the pieces' sums), so a concat term only ever appears at the top of a term.
The LoRA trick thus gets its true meaning::

    matmul(concat(X, X·A, dim=-1), concat(W, B, dim=0))
      = add(sum(256, mul(X, W)), sum(16, mul(sum(256, mul(X, A)), B)))

Element counts are dropped: a mean is the sum it divides (``mean(x) ->
sum(n, x)``) and ``rms_norm(x) = div(x, sqrt(sum(n, mul(x, x))))``. Every op
that creates a count drops it the same way, so a program and its target agree
on them. The program's own float constants (``mul_scalar``, ``add_scalar``,
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
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects.block_structure import Phase, phases_of
from mirage_xdsl.ops import OPS, Form, OpSpec, elementwise_kinds

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

    __slots__ = ("head", "args", "param", "_hash", "__weakref__")

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
        if self.head == "var":
            return frozenset([self.param])
        return frozenset().union(*(a.variables() for a in self.args))


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


# --- piecewise (concat) algebra ------------------------------------------------


def _neg(dim: int, rank: int) -> int:
    return dim - rank if dim >= 0 else dim


def _boundaries(e: Expr, dim: int) -> list[int]:
    """Piece boundaries of ``e`` along ``dim`` (top-level concat only)."""
    if e.head != "concat" or e.param[0] != dim:
        return []
    out, pos = [], 0
    for size in e.param[1][:-1]:
        pos += size
        out.append(pos)
    return out


def slice_expr(e: Expr, dim: int, lo: int, hi: int) -> Expr:
    """The term of ``e[..., lo:hi, ...]`` along ``dim`` (negative)."""
    if e.head != "concat":
        return e
    cdim, sizes = e.param
    if cdim != dim:
        return concat(
            cdim,
            [
                (s, slice_expr(a, dim, lo, hi))
                for s, a in zip(sizes, e.args, strict=True)
            ],
        )
    out, pos = [], 0
    for size, piece in zip(sizes, e.args, strict=True):
        a, b = max(lo, pos), min(hi, pos + size)
        if a < b:
            out.append((b - a, slice_expr(piece, dim, a - pos, b - pos)))
        pos += size
    return concat(dim, out)


def _segments(points: set[int], size: int) -> list[tuple[int, int]]:
    cuts = [0, *sorted(p for p in points if 0 < p < size), size]
    return list(zip(cuts, cuts[1:], strict=False))


def _with_dim(shape: Shape, dim: int, size: int) -> Shape:
    s = list(shape)
    s[dim] = size
    return tuple(s)


def _split_dim(operands: Sequence[Expr], shapes: Sequence[Shape]) -> int | None:
    """A dim along which some (non-broadcast) operand is piecewise."""
    for e, shape in zip(operands, shapes, strict=True):
        if e.head == "concat" and shape[e.param[0]] != 1:
            return e.param[0]
    return None


def pointwise(
    build: Callable[..., Expr], operands: Sequence[Expr], shapes: Sequence[Shape]
) -> Expr:
    """Apply an element-wise op, pushing it through piecewise operands.

    Operands of size 1 along the split dim broadcast and are not sliced.
    """
    dim = _split_dim(operands, shapes)
    if dim is None:
        return build(*operands)
    size = max(shape[dim] for shape in shapes)
    points = {
        p
        for e, shape in zip(operands, shapes, strict=True)
        if shape[dim] != 1
        for p in _boundaries(e, dim)
    }
    out = []
    for lo, hi in _segments(points, size):
        args = [
            e if shape[dim] == 1 else slice_expr(e, dim, lo, hi)
            for e, shape in zip(operands, shapes, strict=True)
        ]
        sub_shapes = [
            shape if shape[dim] == 1 else _with_dim(shape, dim, hi - lo)
            for shape in shapes
        ]
        out.append((hi - lo, pointwise(build, args, sub_shapes)))
    return concat(dim, out)


def reduce(x: Expr, shape: Shape, dim: int) -> Expr:
    """Sum over ``dim``: a piecewise dim adds its pieces' sums."""
    dim = _neg(dim, len(shape))
    if x.head != "concat":
        return sum_(shape[dim], x)
    cdim, sizes = x.param
    parts = [
        reduce(a, _with_dim(shape, cdim, s), dim)
        for s, a in zip(sizes, x.args, strict=True)
    ]
    if cdim == dim:
        total = parts[0]
        for p in parts[1:]:
            total = add(total, p)
        return total
    return concat(cdim, list(zip(sizes, parts, strict=True)))


def reduce_max(x: Expr, shape: Shape, dim: int) -> Expr:
    """Maximum over ``dim``: ``max(x)``, pushed through pieces along other
    dims. A row made of pieces along ``dim`` is ``max`` of the pieces added,
    an over-approximation (it forgets their order), which only prunes less."""
    dim = _neg(dim, len(shape))
    if x.head != "concat":
        return Expr("max", (x,))
    cdim, sizes = x.param
    if cdim == dim:
        parts = pieces(x)
        total = parts[0]
        for p in parts[1:]:
            total = add(total, p)
        return Expr("max", (total,))
    parts = [
        reduce_max(a, _with_dim(shape, cdim, s), dim)
        for s, a in zip(sizes, x.args, strict=True)
    ]
    return concat(cdim, list(zip(sizes, parts, strict=True)))


def matmul(lhs: Expr, rhs: Expr, lshape: Shape, rshape: Shape) -> Expr:
    """``sum(k, mul(a, b))``, split along whichever dims are piecewise."""
    rank = len(lshape)
    for e, side in ((lhs, 0), (rhs, 1)):
        if e.head != "concat":
            continue
        dim = e.param[0]
        contraction = dim == (-1 if side == 0 else -2)
        if contraction:
            continue
        batch = dim < -2
        out = []
        pos = 0
        for size, piece in zip(e.param[1], e.args, strict=True):
            if side == 0:
                r = slice_expr(rhs, dim, pos, pos + size) if batch else rhs
                rs = _with_dim(rshape, dim, size) if batch else rshape
                part = matmul(piece, r, _with_dim(lshape, dim, size), rs)
            else:
                lh = slice_expr(lhs, dim, pos, pos + size) if batch else lhs
                ls = _with_dim(lshape, dim, size) if batch else lshape
                part = matmul(lh, piece, ls, _with_dim(rshape, dim, size))
            out.append((size, part))
            pos += size
        return concat(dim, out)
    k = lshape[-1]
    points = set(_boundaries(lhs, -1)) | set(_boundaries(rhs, -2))
    if not points:
        return sum_(k, mul(lhs, rhs))
    total: Expr | None = None
    for lo, hi in _segments(points, k):
        part = matmul(
            slice_expr(lhs, -1, lo, hi),
            slice_expr(rhs, -2, lo, hi),
            _with_dim(lshape, -1, hi - lo),
            _with_dim(rshape, -2, hi - lo),
        )
        total = part if total is None else add(total, part)
    assert total is not None and rank >= 2
    return total


def concat_op(a: Expr, b: Expr, ashape: Shape, bshape: Shape, dim: int) -> Expr:
    dim = _neg(dim, len(ashape))
    return concat(dim, [(ashape[dim], a), (bshape[dim], b)])


def rms_norm(x: Expr, shape: Shape, eps: float = 0.0) -> Expr:
    """``x / sqrt(mean(x^2) + eps)`` over the last dim, with the ``1/n`` dropped
    (the same term the mean accumulator plus ``add_scalar`` gives)."""
    sq = pointwise(mul, [x, x], [shape, shape])
    norm_shape = _with_dim(shape, -1, 1)
    mean = reduce(sq, shape, -1)
    if eps:
        mean = pointwise(lambda m: add(m, constant(eps)), [mean], [norm_shape])
    norm = pointwise(sqrt, [mean], [norm_shape])
    return pointwise(div, [x, norm], [shape, norm_shape])


def forloop_accum(
    x: Expr,
    shape: Shape,
    attrs: Mapping[str, object],
    shift: tuple[Expr, Shape] | None = None,
) -> Expr:
    """Accumulation over ``forloop`` iterations (see ``block.ACCUM_REDUCTIONS``).

    Adding a tile over F iterations is ``sum(F, x)`` whether or not the tile
    varies with the iteration. ``mean`` and ``rms`` divide by the number of
    elements they saw (dropped); a loop-invariant tile (``loop_invariant``)
    is seen once, so they then reduce only the tile's last dim. A ``shift``
    ``m`` weights each term by ``exp(m - max(m))``, the maximum taken over
    the iterations.
    """
    if shift is not None:
        m, m_shape = shift
        top = unary_head("max")(m)
        weight = exp(add(m, unary_head("neg")(top)))
        x = pointwise(mul, [weight, x], [m_shape, shape])
    reduction = str(attrs.get("reduction", "none"))
    forloop = int(attrs.get("forloop", 1))  # type: ignore[call-overload]
    invariant = bool(attrs.get("loop_invariant", False))

    def iterations(t: Expr, t_shape: Shape) -> Expr:
        # iterations add element by element: through a concatenation's
        # pieces, so that it stays at the top of the term
        return pointwise(lambda a: sum_(forloop, a), [t], [t_shape])

    if reduction == "none":
        return iterations(x, shape)
    if reduction == "rms":
        x = pointwise(mul, [x, x], [shape, shape])
    total = reduce(x, shape, -1)
    if not (invariant and reduction in ("mean", "rms")):
        total = iterations(total, _with_dim(shape, -1, 1))
    if reduction == "rms":
        total = pointwise(sqrt, [total], [_with_dim(shape, -1, 1)])
    return total


# --- the table keyed by op KIND --------------------------------------------------

ExprRule = Callable[[Sequence[Expr], Sequence[Shape], Mapping[str, object]], Expr]


TERMS = SimpleNamespace(add=add, mul=mul, div=div, const=constant)
"""The term builders an op table ``expr`` formula is written against
(``const(c)``: a constant as its own variable)."""


def _elementwise(spec: OpSpec) -> ExprRule:
    """An element-wise op's term, pushed through piecewise operands: its
    ``expr`` formula over :data:`TERMS` (after the operands, a scalar op's
    constant ``attrs["scalar"]``), else its head applied to the operands."""

    def rule(xs: Sequence[Expr], shapes: Sequence[Shape], attrs: Mapping) -> Expr:
        formula = spec.expr
        if formula is None:
            return pointwise(lambda *args: Expr(spec.kind, args), xs, shapes)
        c = (float(attrs["scalar"]),) if spec.form is Form.SCALAR else ()
        return pointwise(lambda *args: formula(TERMS, *args, *c), xs, shapes)

    return rule


def _dim(attrs: Mapping[str, object]) -> int:
    return int(attrs["dim"])  # type: ignore[call-overload]


ABSTRACT_EXPRS: dict[str, ExprRule] = {
    **{kind: _elementwise(OPS[kind]) for kind in elementwise_kinds()},
    "rms_norm": lambda xs, shapes, attrs: rms_norm(
        xs[0],
        shapes[0],
        float(attrs.get("eps", 0.0)),  # type: ignore[arg-type]
    ),
    "matmul": lambda xs, shapes, attrs: matmul(xs[0], xs[1], shapes[0], shapes[1]),
    "reduce_sum": lambda xs, shapes, attrs: reduce(xs[0], shapes[0], _dim(attrs)),
    "reduce_max": lambda xs, shapes, attrs: reduce_max(xs[0], shapes[0], _dim(attrs)),
    "concat": lambda xs, shapes, attrs: concat_op(
        xs[0], xs[1], shapes[0], shapes[1], _dim(attrs)
    ),
    "forloop_accum": lambda xs, shapes, attrs: forloop_accum(
        xs[0], shapes[0], attrs, (xs[1], shapes[1]) if len(xs) > 1 else None
    ),
    # Layout ops move elements and compute nothing: the term is kept. (The
    # search never sees them: it works on the segments between them.)
    "transpose": lambda xs, shapes, attrs: xs[0],
    "reshape": lambda xs, shapes, attrs: xs[0],
    # Partitioning is abstracted away: a tile has its tensor's term, and a
    # device tensor stitched from tiles has the tiles' term.
    "input": lambda xs, shapes, attrs: xs[0],
    "output": lambda xs, shapes, attrs: xs[0],
}
"""Op ``KIND`` -> its abstract expression from operand terms, shapes, attrs."""


def op_expr(
    kind: str,
    operands: Sequence[Expr],
    operand_shapes: Sequence[tuple[int, ...]],
    attrs: Mapping[str, object] | None = None,
) -> Expr:
    """The abstract expression of an op of ``kind`` (a ``KIND`` of tensor_ops).

    ``attrs`` carries ``dim`` for ``reduce_sum``/``reduce_max``/``concat``, ``scalar`` for
    ``mul_scalar``/``add_scalar``, ``eps`` (optional) for ``rms_norm``, and
    ``reduction``, ``forloop`` (and optionally ``loop_invariant``) for
    ``forloop_accum``. ``input``/``output`` are the block iterators.
    """
    rule = ABSTRACT_EXPRS.get(kind)
    if rule is None:
        raise KeyError(f"no abstract expression for op kind '{kind}'")
    shapes = [tuple(s) for s in operand_shapes]
    return rule(list(operands), shapes, attrs or {})


# --- labelling a program ----------------------------------------------------------


def _shape(v: SSAValue) -> Shape:
    return tuple(v.type.get_shape())  # type: ignore[attr-defined]


def _op_attrs(op: Operation, phases: Mapping[SSAValue, Any] | None) -> dict:
    attrs: dict[str, object] = {}
    if "dim" in op.properties:
        attrs["dim"] = op.dim.value.data  # type: ignore[attr-defined]
    if "scalar" in op.properties:
        attrs["scalar"] = op.value  # type: ignore[attr-defined]
    if "eps" in op.properties:
        attrs["eps"] = op.eps_value  # type: ignore[attr-defined]
    if op.name == "block.forloop_accum":
        parent = op.parent_op()
        attrs["reduction"] = op.reduction  # type: ignore[attr-defined]
        attrs["forloop"] = parent.forloop  # type: ignore[union-attr]
        attrs["loop_invariant"] = (
            phases is not None and phases[op.operands[0]] == Phase.INVARIANT
        )
    return attrs


def _label_ops(
    ops: Sequence[Operation],
    env: dict[SSAValue, Expr],
    phases: Mapping[SSAValue, Any] | None = None,
) -> list[Expr]:
    """Label the results of ``ops``; returns the terms the block yields/outputs."""
    outputs: list[Expr] = []
    for op in ops:
        ins = [env[v] for v in op.operands]
        if op.name == "kernel.customized":
            body = op.regions[0].block
            env.update(zip(body.args, ins, strict=True))
            outs = _label_ops(list(body.ops), env, phases_of(op))
            env.update(zip(op.results, outs, strict=True))
        elif op.name == "block.thread_graph":
            body = op.regions[0].block
            env.update(zip(body.args, ins, strict=True))
            outs = _label_ops(list(body.ops), env)
            env.update(zip(op.results, outs, strict=True))
        elif op.name == "block.input":
            env[op.results[0]] = ins[0]
        elif op.name == "block.output":
            outputs.append(ins[0])
        elif op.name in ("thread.yield", "func.return"):
            outputs.extend(ins)
        else:
            kind = getattr(op, "KIND", None)
            if kind is None:
                raise KeyError(f"no abstract expression for '{op.name}'")
            shapes = [_shape(v) for v in op.operands]
            env[op.results[0]] = op_expr(kind, ins, shapes, _op_attrs(op, phases))
    return outputs


def exprs_of_function(
    func_op: Operation, input_names: Sequence[str] | None = None
) -> dict[SSAValue, Expr]:
    """The abstract expression of every value of a ``func.func``, at every level.

    Inputs are variables named ``input_names`` (default ``in0``, ``in1``, ...).
    ``kernel.customized`` results get their ``block.output`` operands' terms.
    """
    body = func_op.regions[0].block
    names = input_names or [f"in{i}" for i in range(len(body.args))]
    env: dict[SSAValue, Expr] = {
        a: var(n) for a, n in zip(body.args, names, strict=True)
    }
    _label_ops(list(body.ops), env)
    return env


def output_exprs(
    func_op: Operation, input_names: Sequence[str] | None = None
) -> list[Expr]:
    """The terms a function returns, in order."""
    env = exprs_of_function(func_op, input_names)
    ret = func_op.regions[0].block.last_op
    assert ret is not None
    return [env[v] for v in ret.operands]


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
