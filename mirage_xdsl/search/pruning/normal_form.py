"""Canonical forms of abstract expressions and a direct subexpression test.

The equivalence axioms (``seeds/001``; ``docs/abstract_expressions.md``) make
terms behave like fractions of polynomials in which:

- ``add`` and ``mul`` are associative and commutative and ``mul`` distributes
  over ``add``, but nothing cancels and equal terms never merge
  (``x + x`` is not ``sum(2, x)``);
- ``sum(k, .)`` is a positive-integer scalar: it distributes over ``add``,
  moves into one factor of a product or into a numerator, and nests by
  multiplying (``sum(i, sum(j, x)) = sum(i*j, x)``, ``sum(1, x) = x``);
- ``div`` only ever combines numerators over one denominator, multiplies a
  fraction by a factor and nests denominators into a product.

So every term equals exactly one *normal form*: a multiset of
``(count, monomial, denominator)`` triples, a monomial being a multiset of
atoms (variables, and a unary head such as ``exp``/``sqrt``/``silu`` of a normal form) and a
denominator a normal form itself (``()`` meaning none). Two terms are equal
under the axioms iff their normal forms are equal.

:func:`subexpr` decides ``e ⊑ s`` on normal forms. ``s`` decomposes (as
``op(a, b)`` for some equal term) only by splitting its multiset (``add``),
factoring (``mul``), dividing by a common denominator factor (``div``) or by
a common count (``sum``), or, inside a term, by opening an atom or a
denominator. Composing the top-level steps, ``e`` is reachable from ``s``
without opening anything iff ``e · X ⊆ s`` (as multisets) for some
*multiplier* ``X``: a term with count, monomial and denominator, or a sum of
such; and a sum of multipliers works only if each of its terms does, so a
single term suffices. ``X`` is found by dividing a term of ``s`` by the first
term of ``e``. The one step this cannot always do is dividing a multi-term
denominator by another; there the answer is ``None`` (unknown).
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache

from mirage_xdsl.search.pruning import abstract_expr as ae
from mirage_xdsl.search.pruning.abstract_expr import Expr

# Types, as plain tuples so they hash and compare structurally:
#   Poly  = tuple[Term, ...]          sorted multiset, () only as "no denominator"
#   Term  = tuple[int, Mono, Poly]    (count, monomial, denominator)
#   Mono  = tuple[Atom, ...]          sorted multiset
#   Atom  = tuple[str, str | Poly]    ("v", name) | (head, argument)
Poly = tuple
Term = tuple
ONE: Poly = ()

_FAIL = "fail"
_UNKNOWN = "unknown"


def _sorted(items) -> tuple:
    return tuple(sorted(items))


def var_nf(name: str) -> Poly:
    return ((1, (("v", name),), ONE),)


def atom_nf(head: str, arg: Poly) -> Poly:
    return ((1, ((head, arg),), ONE),)


def add_nf(p: Poly, q: Poly) -> Poly:
    return _sorted(p + q)


def _den_mul(d1: Poly, d2: Poly) -> Poly:
    if not d1:
        return d2
    if not d2:
        return d1
    return mul_nf(d1, d2)


def term_mul(t: Term, u: Term) -> Term:
    return (t[0] * u[0], _sorted(t[1] + u[1]), _den_mul(t[2], u[2]))


@lru_cache(maxsize=1 << 16)
def mul_nf(p: Poly, q: Poly) -> Poly:
    return _sorted(term_mul(t, u) for t in p for u in q)


def div_nf(p: Poly, q: Poly) -> Poly:
    return _sorted((k, m, _den_mul(d, q)) for k, m, d in p)


def sum_nf(n: int, p: Poly) -> Poly:
    return _sorted((k * n, m, d) for k, m, d in p)


@lru_cache(maxsize=1 << 16)
def normal_form(e: Expr) -> Poly:
    """The canonical form of a (non-piecewise) term."""
    h = e.head
    if h == "var":
        return var_nf(e.param)
    if h == "sum":
        return sum_nf(e.param, normal_form(e.args[0]))
    if h in ae.UNARY_HEADS:
        return atom_nf(h, normal_form(e.args[0]))
    if h == "concat":
        raise ValueError("a piecewise (concat) term has no single normal form")
    a, b = normal_form(e.args[0]), normal_form(e.args[1])
    if h == "add":
        return add_nf(a, b)
    if h == "mul":
        return mul_nf(a, b)
    return div_nf(a, b)


def to_expr(p: Poly) -> Expr:
    """A term with normal form ``p`` (for printing and for z3)."""

    def atom(a) -> Expr:
        if a[0] == "v":
            return ae.var(a[1])
        return Expr(a[0], (to_expr(a[1]),))

    def term(t: Term) -> Expr:
        k, mono, den = t
        e = atom(mono[0])
        for a in mono[1:]:
            e = ae.mul(e, atom(a))
        e = ae.sum_(k, e)
        return ae.div(e, to_expr(den)) if den else e

    out = term(p[0])
    for t in p[1:]:
        out = ae.add(out, term(t))
    return out


# --- division of normal forms ----------------------------------------------------


def _mono_minus(m: tuple, n: tuple):
    rest = Counter(m)
    rest.subtract(n)
    if any(c < 0 for c in rest.values()):
        return _FAIL
    return _sorted(rest.elements())


def _valid(p: Poly) -> bool:
    """``p`` is a term (not a bare count or 1/D): every monomial non-empty."""
    return bool(p) and all(t[1] for t in p)


@lru_cache(maxsize=1 << 16)
def den_quotient(d: Poly, q: Poly):
    """``B`` with ``q · B = d`` as denominators (``ONE`` when ``d == q``).

    ``B`` must be a term, since it is what a ``div`` step divides by. Returns
    ``_FAIL`` when there is none and ``_UNKNOWN`` when a multi-term quotient
    of a multi-term divisor would be needed.
    """
    if d == q:
        return ONE
    if not q:
        return d
    if not d:
        return _FAIL
    if len(q) == 1:
        terms = [term_quotient(t, q[0]) for t in d]
        if any(isinstance(t, str) for t in terms):
            return _UNKNOWN if _UNKNOWN in terms else _FAIL
        b = _sorted(terms)
        return b if _valid(b) else _FAIL
    if len(d) % len(q):
        return _FAIL
    if len(d) == len(q):
        for t in set(d):
            b = term_quotient(t, q[0])
            if isinstance(b, str) or not b[1]:
                continue
            if mul_nf(q, (b,)) == d:
                return (b,)
        return _FAIL
    return _UNKNOWN


def term_quotient(t: Term, u: Term):
    """The multiplier ``x`` with ``u · x = t`` (its monomial may be empty)."""
    k, r = divmod(t[0], u[0])
    if r:
        return _FAIL
    mono = _mono_minus(t[1], u[1])
    if mono == _FAIL:
        return _FAIL
    den = den_quotient(t[2], u[2])
    if isinstance(den, str):
        return den
    return (k, mono, den)


def _is_submultiset(small: Poly, big: Poly) -> bool:
    need = Counter(small)
    have = Counter(big)
    return all(have[t] >= c for t, c in need.items())


def _top_level(e: Poly, s: Poly):
    """Is ``e · X ⊆ s`` for some multiplier ``X``? (True / False / None)."""
    if len(e) > len(s):
        return False
    unknown = False
    for t in set(s):
        x = term_quotient(t, e[0])
        if x == _UNKNOWN:
            unknown = True
            continue
        if x == _FAIL:
            continue
        if _is_submultiset(_sorted(term_mul(ei, x) for ei in e), s):
            return True
    return None if unknown else False


@lru_cache(maxsize=1 << 18)
def subexpr(e: Poly, s: Poly):
    """Decide ``e ⊑ s`` on normal forms: True, False, or None (unknown)."""
    if e == s:
        return True
    verdict = _top_level(e, s)
    if verdict:
        return True
    unknown = verdict is None
    for _, mono, den in set(s):
        inner = [a[1] for a in set(mono) if a[0] != "v"]
        if den:
            inner.append(den)
        for p in inner:
            r = subexpr(e, p)
            if r:
                return True
            unknown |= r is None
    return None if unknown else False


def atoms(p: Poly) -> frozenset:
    """Every atom anywhere in ``p`` (a quick necessary condition)."""
    out = set()
    for _, mono, den in p:
        for a in mono:
            out.add(a)
            if a[0] != "v":
                out |= atoms(a[1])
        out |= atoms(den)
    return frozenset(out)
