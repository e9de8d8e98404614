"""The fused default build of a row-local program: one kernel, whole rows.

A program whose every op is element-wise, reads whole rows of the last dim
(``reduce_sum``, ``reduce_max``, ``rms_norm`` over it) or moves elements
within a row (``slice`` and ``concat`` along the last dim, as a rotary
embedding's ``rotate_half``) needs no kernel boundary at all: each row is
computed from the same rows of its operands. Inductor emits such a program
as one persistent-reduction kernel; this is the same build as a µGraph: one
``kernel.customized`` whose grid tiles the leading dims, whose blocks read
whole rows, and whose block graph holds the program's ops as written.

A slice becomes no block op of its own: it is pushed back through the ops
before it to the arguments (``slice(f(x, y)) = f(slice(x), slice(y))`` for
an element-wise ``f``; a slice of a concatenation is a slice of its pieces),
where a ``block.input`` reads its window of the row in place. A
concatenation stays one (``block.concat``).

Parts of a program that share no op and no rows (the rotary embeddings of
a layer's queries over 4 heads and keys over 2, side by side) are a kernel
each, over their own rows, where one grid would cover neither.

It is a candidate beside the search's own, and the input (one kernel per
op) beside both: a LayerNorm written as ten plain ops is one kernel even
when the search cannot enumerate a ten-op block graph within its budget.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace

from mirage_xdsl.dialects.shapes import lift
from mirage_xdsl.ir.union_find import UnionFind
from mirage_xdsl.search.ugraph import (
    ELEMENTWISE,
    BlockGraph,
    BlockInput,
    KernelOp,
    Op,
    Shape,
    UGraph,
    kernel_shapes,
)

ROW_KINDS = ("reduce_sum", "reduce_max")
"""Reductions a row-local program may hold (over its last dim only)."""

ROW_LAYOUT_KINDS = ("slice", "concat")
"""Layout ops a row-local program may hold (along its last dim only)."""

MAX_GRID = 65535
"""Most blocks along one grid dim (CUDA's limit on y and z)."""

Window = tuple[int, int, int]


def row_local(ug: UGraph) -> bool:
    """Whether every op of ``ug`` is a library op that computes a row of its
    result from the same rows of its operands: every result of one rank,
    arguments of that rank or lower (lined up with the trailing dims), and
    every slice pushable to the arguments (none takes part of a norm's row)."""
    return _row_ops(ug) and _Rows(ug).build() is not None


def _row_ops(ug: UGraph) -> bool:
    shapes = kernel_shapes(ug)
    rank = _rank(ug)
    if rank == 0 or any(len(s) != rank for s in shapes[len(ug.inputs) :]):
        return False
    for op in ug.ops:
        if op.graph is not None:
            return False
        if op.kind not in (*ELEMENTWISE, *ROW_KINDS, *ROW_LAYOUT_KINDS, "rms_norm"):
            return False
        if op.kind in (*ROW_KINDS, "rms_norm") and len(shapes[op.operands[0]]) < rank:
            return False
        if (
            op.kind in (*ROW_KINDS, *ROW_LAYOUT_KINDS)
            and dict(op.attrs)["dim"] != rank - 1
        ):
            return False
    return True


def _rank(ug: UGraph) -> int:
    return max((len(s) for s in kernel_shapes(ug)), default=0)


class _Rows:
    """The block ops of a row-local program.

    First the columns each tensor is needed for are found, from the outputs
    back (:meth:`_parts`: a slice needs its window of its operand, a
    concatenation the parts of its pieces, an element-wise op the same
    columns of its operands); then each tensor is built once per range of
    columns, in program order. A value is named by a *ref*: ``-1 - k`` for
    the ``k``-th argument read (``reads[k]``: an argument and the window of
    its last dim it reads, or None for all of it), ``j`` for ``ops[j]``."""

    def __init__(self, ug: UGraph):
        self.ug = ug
        self.shapes = kernel_shapes(ug)
        self.first = len(ug.inputs)
        self.reads: list[tuple[int, Window | None]] = []
        self.ops: list[Op] = []

    def build(self) -> list[int] | None:
        """The ref of each output, whole; None when a slice cannot be pushed
        to the arguments (it takes part of a norm's row)."""
        need: list[set[tuple[int, int]]] = [set() for _ in self.shapes]
        for v in self.ug.outputs:
            need[v].add((0, self.shapes[v][-1]))
        for v in reversed(range(self.first, len(self.shapes))):
            for lo, hi in need[v]:
                parts = self._parts(v, lo, hi)
                if parts is None:
                    return None
                for u, a, b in parts:
                    need[u].add((a, b))
        refs: dict[tuple[int, int, int], int] = {}
        for v, columns in enumerate(need):
            for lo, hi in sorted(columns):
                refs[v, lo, hi] = self._make(v, lo, hi, refs)
        return [refs[v, 0, self.shapes[v][-1]] for v in self.ug.outputs]

    def _parts(self, v: int, lo: int, hi: int) -> list[tuple[int, int, int]] | None:
        """The columns of its operands that columns ``[lo, hi)`` of op result
        ``v`` are made of, as ``(tensor, lo, hi)``."""
        op = self.ug.ops[v - self.first]
        width = self.shapes[v][-1]
        if op.kind == "slice":
            start = dict(op.attrs)["start"]
            return [(op.operands[0], start + lo, start + hi)]
        if op.kind == "concat":
            a, b = op.operands
            n = self.shapes[a][-1]
            left = [(a, lo, min(hi, n))] if lo < n else []
            return left + ([(b, max(lo - n, 0), hi - n)] if hi > n else [])
        if (lo, hi) != (0, width) and op.kind not in ELEMENTWISE:
            return None  # part of a norm's row: the norm needs all of it
        return [
            (u, lo, hi) if self.shapes[u][-1] == width else (u, 0, self.shapes[u][-1])
            for u in op.operands
        ]

    def _make(
        self, v: int, lo: int, hi: int, refs: dict[tuple[int, int, int], int]
    ) -> int:
        """The ref of columns ``[lo, hi)`` of tensor ``v``, its parts made."""
        if v < self.first:
            whole = (lo, hi) == (0, self.shapes[v][-1])
            window = None if whole else (len(self.shapes[v]) - 1, lo, hi)
            if (v, window) not in self.reads:
                self.reads.append((v, window))
            return -1 - self.reads.index((v, window))
        op = self.ug.ops[v - self.first]
        parts = [refs[p] for p in self._parts(v, lo, hi) or ()]
        if op.kind in ROW_LAYOUT_KINDS and len(parts) == 1:
            return parts[0]
        self.ops.append(Op(op.kind, tuple(parts), op.attrs))
        return len(self.ops) - 1

    def order(self) -> list[int]:
        """The refs in block-graph order: the reads by argument (whole
        first), then the ops in the program's order, as it writes them."""
        reads = sorted(
            range(len(self.reads)),
            key=lambda k: (self.reads[k][0], self.reads[k][1] or ()),
        )
        return [-1 - k for k in reads] + list(range(len(self.ops)))


def row_fused(ug: UGraph) -> UGraph | None:
    """``ug`` as one customized kernel over whole rows (before the µGraph
    optimizer), or where no one grid covers it, one for each part of it
    that shares no op with the others (:func:`independent_parts`: the
    rotary embeddings of a layer's queries and keys, over 4 heads and 2);
    None when it is not :func:`row_local` or a part's leading dims do not
    fit a grid."""
    one = _one_kernel(ug)
    if one is not None:
        return one
    parts = independent_parts(ug)
    if len(parts) == 1:
        return None
    kernels: list[KernelOp] = []
    where: dict[int, int] = {}
    for part, numbers in parts:
        fused = _one_kernel(part)
        if fused is None:
            return None
        (kernel,) = fused.ops
        base = len(ug.inputs) + sum(k.n_results for k in kernels)
        where.update((v, base + k) for k, v in enumerate(numbers))
        kernels.append(kernel)
    outputs = tuple(where[v] for v in ug.outputs)
    return replace(ug, ops=tuple(kernels), outputs=outputs)


def independent_parts(ug: UGraph) -> list[tuple[UGraph, tuple[int, ...]]]:
    """``ug`` cut where no op reads another's result, each part with the
    numbers its outputs have in ``ug``. A part keeps every argument (it
    reads those it needs) and returns the outputs its ops make."""
    first = len(ug.inputs)
    linked = UnionFind()
    for j, op in enumerate(ug.ops):
        for v in op.operands:
            if v >= first:
                linked.union(v - first, j)
    groups: dict[Hashable, list[int]] = {}
    for j in range(len(ug.ops)):
        groups.setdefault(linked.find(j), []).append(j)
    if len(groups) == 1:
        return [(ug, ug.outputs)]
    parts = []
    for members in groups.values():
        number = {first + j: first + k for k, j in enumerate(members)}
        ops = tuple(
            replace(
                ug.ops[j], operands=tuple(number.get(v, v) for v in ug.ops[j].operands)
            )
            for j in members
        )
        mine = tuple(v for v in ug.outputs if v in number)
        part = replace(ug, ops=ops, outputs=tuple(number[v] for v in mine))
        parts.append((part, mine))
    return parts


def _one_kernel(ug: UGraph) -> UGraph | None:
    """``ug`` as one customized kernel over whole rows; None when it is not
    :func:`row_local` or its leading dims do not fit one grid."""
    if not _row_ops(ug):
        return None
    built = _Rows(ug)
    refs = built.build()
    if refs is None:
        return None
    rank = _rank(ug)
    shapes = [lift(s, rank) for s in kernel_shapes(ug)]
    read = {v for v, _ in built.reads}
    held = [s for v, s in enumerate(shapes) if v >= len(ug.inputs) or v in read]
    rows = tuple(max(s[d] for s in held) for d in range(rank - 1))
    if not _one_grid(held, [shapes[v] for v in ug.outputs], rows):
        return None
    split = [d for d, n in enumerate(rows) if n > 1][-3:]
    if any(rows[d] > MAX_GRID for d in split):
        return None
    dims = (*split, *[-1] * (3 - len(split)))
    grid = tuple(rows[d] if d >= 0 else 1 for d in dims)
    if any(v < len(ug.inputs) for v in ug.outputs):
        return None  # an argument returned as it is: no kernel writes it
    order = built.order()
    local = {ref: i for i, ref in enumerate(order)}
    used = sorted({v for v, _ in built.reads})
    position = {v: i for i, v in enumerate(used)}
    inputs = tuple(
        BlockInput(
            position[v],
            _imap(shapes[v], rows, dims),
            -1,
            None if len(ug.inputs[v]) == rank else rank,
            window,
        )
        for v, window in (built.reads[-1 - ref] for ref in order if ref < 0)
    )
    ops = tuple(
        Op(op.kind, tuple(local[r] for r in op.operands), op.attrs) for op in built.ops
    )
    outputs = tuple(
        (local[r], _imap(shapes[v], rows, dims))
        for r, v in zip(refs, ug.outputs, strict=True)
    )
    graph = BlockGraph(grid, 1, inputs, ops, outputs)  # type: ignore[arg-type]
    kernel = KernelOp("customized", tuple(used), (), graph)
    outs = tuple(len(ug.inputs) + i for i in range(len(graph.outputs)))
    return replace(ug, ops=(kernel,), outputs=outs)


def _one_grid(shapes: list[Shape], outputs: list[Shape], rows: Shape) -> bool:
    """Whether one grid over ``rows`` covers the program: every tensor's
    leading dims are the rows' or broadcast (size 1), and every output has
    all of them, so that each block writes its own rows. The rotary
    embeddings of a batch's queries and keys, 4 heads and 2, are two
    programs side by side, not one over 4 heads."""
    broadcast = all(s[d] in (1, n) for s in shapes for d, n in enumerate(rows))
    return broadcast and all(tuple(s[:-1]) == rows for s in outputs)


def _imap(shape: Shape, rows: Shape, dims: tuple[int, ...]) -> tuple[int, int, int]:
    """Which dim of a tensor of ``shape`` each grid dim splits: the row dim
    it tiles, or -1 where the tensor is broadcast along it (size 1)."""
    return tuple(  # type: ignore[return-value]
        d if d >= 0 and shape[d] == rows[d] else -1 for d in dims
    )


__all__ = ["row_fused", "row_local"]
