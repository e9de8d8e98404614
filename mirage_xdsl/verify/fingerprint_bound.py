"""Degree bounds of a µGraph, for the verifier's false-positive bound.

``docs/verifier.md`` derives the bound; this module computes its ingredients by
a static walk over the program (shapes only, no values). Every output element
is a rational function ``N / D`` of three groups of variables:

- ``input``: the inputs' Z_p components (uniform over Z_p),
- ``exp``: exp atoms ``omega ** t`` (uniform over the order-q subgroup under the
  generic-exponent model), closed under inverses,
- ``sqrt``: values of the random sqrt function (uniform over Z_p), and of the
  other keyed random functions (the op table's ``KEYED`` ops, and
  reduce_max's per-row function of the whole row), counted alike.

For each tensor the walk keeps the degree of ``N`` and ``D`` in each group, and
which axes the denominator and the set of sqrt atoms are constant along: a sum
of K fractions whose denominators differ needs a common denominator K times as
large, while a softmax row ``e / sum(e)`` shares one denominator. It also counts
how many sqrt atoms an element can depend on (their arguments may collide) and
the degree of every exp and sqrt argument. The walk is an
:class:`~mirage_xdsl.ops.Arith` over these degree facts, so an element-wise op
is bounded by evaluating its op-table field formula, the very steps the finite
field computes it with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects import shapes
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import Phase, phases_of
from mirage_xdsl.ops import OPS
from mirage_xdsl.semantics.interpreter import entry_function
from mirage_xdsl.verify.finite_field import P, Q
from mirage_xdsl.verify.keyed_hash import ROW_DIGEST_COLLISION

GROUPS = ("input", "exp", "sqrt")
Vec = tuple[int, int, int]
ZERO: Vec = (0, 0, 0)


def vadd(*vs: Vec) -> Vec:
    return tuple(sum(c) for c in zip(*vs, strict=True))  # type: ignore[return-value]


def vmax(*vs: Vec) -> Vec:
    return tuple(max(c) for c in zip(*vs, strict=True))  # type: ignore[return-value]


def vscale(v: Vec, k: int) -> Vec:
    return tuple(k * c for c in v)  # type: ignore[return-value]


@dataclass(frozen=True)
class Deg:
    """Degree facts of every element of one tensor."""

    shape: tuple[int, ...]
    num: Vec = ZERO
    den: Vec = ZERO
    monomial: bool = False
    """A constant times a product of exp/sqrt atoms (or their inverses)."""
    den_fixed: frozenset[int] = frozenset()
    """Negative axes along which the denominator is the same."""
    atoms_fixed: frozenset[int] = frozenset()
    """Negative axes along which the set of sqrt atoms is the same."""
    sqrt_fan: int = 0

    def ones(self) -> frozenset[int]:
        """Axes of size one: a broadcast operand is constant along them."""
        n = len(self.shape)
        return frozenset(k - n for k, s in enumerate(self.shape) if s == 1)

    def all_axes(self) -> frozenset[int]:
        return frozenset(range(-len(self.shape), 0))

    def den_const(self) -> frozenset[int]:
        return self.all_axes() if self.den == ZERO else self.den_fixed | self.ones()

    def atoms_const(self) -> frozenset[int]:
        if self.sqrt_fan == 0:
            return self.all_axes()
        return self.atoms_fixed | self.ones()

    def has_atoms(self) -> bool:
        return any(v[1] or v[2] for v in (self.num, self.den))

    def total(self) -> int:
        return sum(self.num) + sum(self.den)


def leaf(shape: Sequence[int]) -> Deg:
    return Deg(tuple(shape), num=(1, 0, 0))


def constant(shape: Sequence[int]) -> Deg:
    return Deg(tuple(shape), monomial=True)


@dataclass
class ProgramDegrees:
    """What the bound needs from one program."""

    outputs: list[Deg]
    exp_arg: int = 0
    """Largest degree (numerator + denominator) of an exp argument."""
    sqrt_arg: int = 0
    sqrt_args_pure: bool = True
    """Every sqrt argument depends on the inputs only (no atoms)."""
    row_atoms: bool = False
    """Some atom is a row function (``reduce_max``), whose row digest may
    collide as well (``keyed_hash.ROW_DIGEST_COLLISION``)."""


@dataclass
class _Walk:
    exp_arg: int = 0
    sqrt_arg: int = 0
    sqrt_args_pure: bool = True
    row_atoms: bool = False
    env: dict[SSAValue, Deg] = field(default_factory=dict)

    # --- element-wise: the Arith the op table's field formulas run on --------

    def _fixed(self, shape, *ds: Deg) -> tuple[frozenset[int], frozenset[int]]:
        den = frozenset(range(-len(shape), 0))
        atoms = den
        for d in ds:
            den &= d.den_const()
            atoms &= d.atoms_const()
        return den, atoms

    def const(self, c: float, like: Deg) -> Deg:
        """A constant: a monomial of degree zero."""
        return constant(like.shape)

    def add(self, a: Deg, b: Deg) -> Deg:
        shape = shapes.broadcast(a.shape, b.shape)
        den_fixed, atoms_fixed = self._fixed(shape, a, b)
        return Deg(
            shape,
            vmax(vadd(a.num, b.den), vadd(b.num, a.den)),
            vadd(a.den, b.den),
            False,
            den_fixed,
            atoms_fixed,
            a.sqrt_fan + b.sqrt_fan,
        )

    def mul(self, a: Deg, b: Deg) -> Deg:
        shape = shapes.broadcast(a.shape, b.shape)
        den_fixed, atoms_fixed = self._fixed(shape, a, b)
        return Deg(
            shape,
            vadd(a.num, b.num),
            vadd(a.den, b.den),
            a.monomial and b.monomial,
            den_fixed,
            atoms_fixed,
            a.sqrt_fan + b.sqrt_fan,
        )

    def div(self, a: Deg, b: Deg) -> Deg:
        if b.monomial:
            # Dividing by atoms multiplies by their inverses, which are atoms of
            # the same group (exp) or are taken as the variable (sqrt).
            return replace(self.mul(a, b), monomial=a.monomial)
        shape = shapes.broadcast(a.shape, b.shape)
        den_fixed, atoms_fixed = self._fixed(shape, a, b)
        den_fixed &= b.ones()  # the new denominator is b's value itself
        return Deg(
            shape,
            vadd(a.num, b.den),
            vadd(a.den, b.num),
            False,
            den_fixed,
            atoms_fixed,
            a.sqrt_fan + b.sqrt_fan,
        )

    def neg(self, a: Deg) -> Deg:
        """``-x`` has ``x``'s degrees."""
        return a

    def exp(self, a: Deg) -> Deg:
        self.exp_arg = max(self.exp_arg, a.total())
        return Deg(
            a.shape, (0, 1, 0), ZERO, True, a.all_axes(), a.atoms_const(), a.sqrt_fan
        )

    def sqrt(self, a: Deg) -> Deg:
        self.sqrt_arg = max(self.sqrt_arg, a.total())
        self.sqrt_args_pure &= not a.has_atoms()
        fixed = a.ones() & a.atoms_const()
        return Deg(a.shape, (0, 0, 1), ZERO, True, a.all_axes(), fixed, a.sqrt_fan + 1)

    def keyed(self, kind: str, a: Deg) -> Deg:
        """A keyed op (sqrt, relu, tanh, ...): a random function, so its values
        are fresh variables of the sqrt group (the arguments of any two may
        collide exactly as sqrt arguments may)."""
        return self.sqrt(a)

    # --- reductions ----------------------------------------------------------

    def reduce_max(self, a: Deg, axis: int) -> Deg:
        """The row maximum: a random function of the whole row, one fresh
        variable of the sqrt group per row. Its argument is every element of
        the row, so the row's atoms all reach it (two rows collide only if
        they agree at every position, at least as unlikely as one pair of
        differing elements colliding: the sqrt argument's case)."""
        k = a.shape[axis]
        fan = a.sqrt_fan * (k if axis not in a.atoms_const() else 1)
        shape = list(a.shape)
        shape[axis] = 1
        fixed = (a.ones() & a.atoms_const()) | {axis}
        return self._row_atom(a, tuple(shape), fan, fixed)

    def _row_atom(
        self, a: Deg, shape: tuple[int, ...], fan: int, fixed: frozenset[int]
    ) -> Deg:
        """One fresh sqrt-group variable per row of ``a`` (``fan`` atoms of
        the row reach it), kept constant along ``fixed``."""
        self.sqrt_arg = max(self.sqrt_arg, a.total())
        self.sqrt_args_pure &= not a.has_atoms()
        self.row_atoms = True
        d = Deg(shape, sqrt_fan=fan)
        return Deg(shape, (0, 0, 1), ZERO, True, d.all_axes(), fixed, fan + 1)

    @staticmethod
    def _sum_terms(d: Deg, varies_den: bool, varies_atoms: bool, k: int) -> Deg:
        """Degrees of a sum of k terms like ``d``."""
        if varies_den and d.den != ZERO:
            d = replace(d, num=vadd(d.num, vscale(d.den, k - 1)), den=vscale(d.den, k))
        if varies_atoms:
            d = replace(d, sqrt_fan=d.sqrt_fan * k)
        return d

    def sum(self, a: Deg, axis: int) -> Deg:
        k = a.shape[axis]
        d = self._sum_terms(
            a, axis not in a.den_const(), axis not in a.atoms_const(), k
        )
        shape = list(a.shape)
        shape[axis] = 1
        return replace(
            d,
            shape=tuple(shape),
            monomial=False,
            den_fixed=d.den_const() | {axis},
            atoms_fixed=d.atoms_const() | {axis},
        )

    def matmul(self, a: Deg, b: Deg, shape) -> Deg:
        k = a.shape[-1]
        a_den, b_den = -1 not in a.den_const(), -2 not in b.den_const()
        den = vadd(vscale(a.den, k if a_den else 1), vscale(b.den, k if b_den else 1))
        num = vadd(a.num, b.num, den, vscale(a.den, -1), vscale(b.den, -1))
        fan = a.sqrt_fan * (k if -1 not in a.atoms_const() else 1)
        fan += b.sqrt_fan * (k if -2 not in b.atoms_const() else 1)
        batch = frozenset(range(-len(shape), -2))
        den_fixed = (a.den_const() & batch) & b.den_const()
        den_fixed |= ({-2} & a.den_const()) | ({-1} & b.den_const())
        atoms_fixed = (a.atoms_const() & batch) & b.atoms_const()
        atoms_fixed |= ({-2} & a.atoms_const()) | ({-1} & b.atoms_const())
        return Deg(tuple(shape), num, den, False, den_fixed, atoms_fixed, fan)

    def all_reduce(self, a: Deg, shards: int) -> Deg:
        """A sum over ``shards`` shards: terms like ``a`` whose denominators
        and sqrt atoms may all differ, since each shard reads other inputs."""
        return replace(self._sum_terms(a, True, True, shards), monomial=False)

    def rms(self, a: Deg, axis: int, eps: float = 0.0) -> Deg:
        mean = self.sum(self.mul(a, a), axis)
        return self.sqrt(self.add(mean, self.const(eps, mean)) if eps else mean)

    def layout(self, op: t.TensorOp, a: Deg, shape) -> Deg:
        """Moving elements keeps every degree. A transpose swaps the axes its
        facts hold along; a slice keeps them (they hold on any part), and so
        does a cast (the identity in the field); after a reshape or a
        broadcast none is assumed to hold (a larger common denominator, so a
        larger, still valid, bound)."""
        if op.KIND in ("slice", "cast"):  # a cast is the identity in the field
            return replace(a, shape=tuple(shape))
        if op.KIND in ("reshape", "broadcast"):
            return replace(
                a, shape=tuple(shape), den_fixed=frozenset(), atoms_fixed=frozenset()
            )
        n = len(shape)
        i, j = (d - n for d in op.dims)  # type: ignore[attr-defined]
        swap = {i: j, j: i}

        def moved(axes: frozenset[int]) -> frozenset[int]:
            return frozenset(swap.get(x, x) for x in axes)

        return replace(
            a,
            shape=tuple(shape),
            den_fixed=moved(a.den_fixed),
            atoms_fixed=moved(a.atoms_fixed),
        )

    # --- ops -----------------------------------------------------------------

    def tensor_op(self, op: t.TensorOp, args: list[Deg]) -> Deg:
        shape = t.tensor_shape(op.results[0])
        kind = op.KIND
        spec = OPS[kind]
        if spec.elementwise:
            return spec.field_apply(self, *args, *op.constant_args())
        if kind == "matmul":
            return self.matmul(args[0], args[1], shape)
        if kind == "rms_norm":
            eps = op.eps_value  # type: ignore[attr-defined]
            return self.div(args[0], self.rms(args[0], -1, eps))
        if kind in t.LAYOUT_KINDS and kind != "concat":
            return self.layout(op, args[0], shape)
        dim = op.dim.value.data - len(shape)  # type: ignore[attr-defined]
        if kind == "reduce_sum":
            return self.sum(args[0], dim)
        if kind == "reduce_max":
            return self.reduce_max(args[0], dim)
        if kind == "concat":
            a, b = args
            den_fixed, atoms_fixed = self._fixed(shape, a, b)
            same = a.den == ZERO and b.den == ZERO
            return Deg(
                tuple(shape),
                vmax(a.num, b.num),
                vmax(a.den, b.den),
                False,
                den_fixed if same else den_fixed - {dim},
                atoms_fixed - {dim},
                max(a.sqrt_fan, b.sqrt_fan),
            )
        raise NotImplementedError(f"no degree rule for '{op.name}'")

    def shift_weights(self, shift: Deg, varying: bool, forloop: int) -> Deg:
        """``exp(shift - M)``, ``M`` the shift's maximum over the iterations: a
        row function of the shifts (one fresh sqrt-group variable per row, as
        ``reduce_max``), then an exp atom."""
        fan = shift.sqrt_fan * (forloop if varying else 1)
        fixed = shift.ones() & shift.atoms_const()
        top = self._row_atom(shift, shift.shape, fan, fixed)
        return self.exp(self.add(shift, top))

    def forloop_accum(self, op: Operation, x: Deg, varying: bool, forloop: int) -> Deg:
        if varying and forloop > 1:
            # Iterations see different tiles: their denominators and sqrt atoms
            # may all differ.
            x = self._sum_terms(x, True, True, forloop)
            x = replace(x, monomial=False)
        reduction = op.reduction  # type: ignore[attr-defined]
        if reduction == "none":
            return replace(x, monomial=False)
        if reduction in ("sum", "mean"):
            return self.sum(x, -1)
        return self.sqrt(self.sum(self.mul(x, x), -1))

    def customized(self, op: Operation, args: list[Deg]) -> list[Deg]:
        block = op.regions[0].block
        phases = phases_of(op)
        env = dict(zip(block.args, args, strict=True))
        outs: list[Deg] = []
        grid = op.grid_dims  # type: ignore[attr-defined]
        for inner in block.ops:
            ins = [env[v] for v in inner.operands]
            tile = t.tensor_shape(inner.results[0]) if inner.results else ins[0].shape
            if inner.name == "block.input":
                env[inner.results[0]] = replace(ins[0], shape=tile)
            elif inner.name == "block.output":
                split = {
                    d - len(ins[0].shape)
                    for g, d in enumerate(inner.output_map)  # type: ignore[attr-defined]
                    if d >= 0 and grid[g] > 1
                }
                out = ins[0]
                shape = tuple(
                    s
                    * math.prod(
                        grid[g] for g, d in enumerate(inner.output_map) if d == i
                    )  # type: ignore[attr-defined]
                    for i, s in enumerate(out.shape)
                )
                outs.append(
                    replace(
                        out,
                        shape=shape,
                        den_fixed=out.den_const() - split,
                        atoms_fixed=out.atoms_const() - split,
                    )
                )
            elif inner.name == "block.forloop_accum":
                varying = any(phases[v] == Phase.LOOP for v in inner.operands)
                if len(ins) > 1 and phases[inner.operands[1]] == Phase.LOOP:
                    weights = self.shift_weights(ins[1], varying, op.forloop)  # type: ignore[attr-defined]
                    ins[0] = self.mul(weights, ins[0])
                env[inner.results[0]] = self.forloop_accum(
                    inner,
                    ins[0],
                    varying,
                    op.forloop,  # type: ignore[attr-defined]
                )
            elif inner.name == "block.thread_graph":
                env.update(
                    zip(inner.results, self.region(inner.regions[0], ins), strict=True)
                )
            else:
                env[inner.results[0]] = self.tensor_op(inner, ins)  # type: ignore[arg-type]
        return outs

    def region(self, region, args: list[Deg]) -> list[Deg]:
        block = region.block
        env = dict(zip(block.args, args, strict=True))
        for inner in block.ops:
            ins = [env[v] for v in inner.operands]
            if inner.name == "thread.yield":
                return ins
            env[inner.results[0]] = self.tensor_op(inner, ins)  # type: ignore[arg-type]
        raise ValueError("thread graph without thread.yield")

    def function(self, fn: func.FuncOp) -> list[Deg]:
        env: dict[SSAValue, Deg] = {
            a: leaf(t.tensor_shape(a)) for a in fn.body.block.args
        }
        for op in fn.body.block.ops:
            ins = [env[v] for v in op.operands]
            if isinstance(op, func.ReturnOp):
                return ins
            if op.name == "kernel.customized":
                env.update(zip(op.results, self.customized(op, ins), strict=True))
            elif op.name == "kernel.all_reduce":
                env[op.results[0]] = self.all_reduce(ins[0], op.group_size)  # type: ignore[attr-defined]
            else:
                env[op.results[0]] = self.tensor_op(op, ins)  # type: ignore[arg-type]
        raise ValueError("function without func.return")


def program_degrees(module: ModuleOp) -> ProgramDegrees:
    walk = _Walk()
    outputs = walk.function(entry_function(module))
    return ProgramDegrees(
        outputs, walk.exp_arg, walk.sqrt_arg, walk.sqrt_args_pure, walk.row_atoms
    )


@dataclass(frozen=True)
class TrialBound:
    """The per-trial false-positive probability and its parts."""

    polynomial: float
    """Schwartz–Zippel on the cleared difference of the worst output."""
    exponents: float
    """Distinct exponents of the witness evaluating equal in Z_q."""
    sqrt_collisions: float
    """Two distinct sqrt arguments evaluating equal (sqrt values are never zero)."""

    @property
    def total(self) -> float:
        return min(1.0, self.polynomial + self.exponents + self.sqrt_collisions)


def trial_bound(a: ProgramDegrees, b: ProgramDegrees) -> TrialBound:
    """Probability that one trial passes two non-equivalent programs (see docs)."""
    sizes = (P, Q, P - 1)  # sqrt values are uniform over the nonzero residues
    poly = 0.0
    for da, db in zip(a.outputs, b.outputs, strict=True):
        cleared = vadd(vmax(vadd(da.num, db.den), vadd(db.num, da.den)), da.den, db.den)
        poly = max(poly, sum(d / s for d, s in zip(cleared, sizes, strict=True)))
    exponents = (a.exp_arg + b.exp_arg) / Q if a.exp_arg or b.exp_arg else 0.0
    fan = max((d.sqrt_fan for d in a.outputs), default=0) + max(
        (d.sqrt_fan for d in b.outputs), default=0
    )
    degree = a.sqrt_arg + b.sqrt_arg
    per_pair = degree / P
    if a.sqrt_args_pure and b.sqrt_args_pure:
        per_pair *= degree / Q
    if a.row_atoms or b.row_atoms:
        per_pair += ROW_DIGEST_COLLISION
    collisions = fan * (fan - 1) / 2 * per_pair
    return TrialBound(poly, exponents, collisions)
