"""Matmuls of a Triton kernel.

A ``block.matmul`` prints as one ``tl.dot`` whose operands are cast to the
tile's element type (f16 or bf16 run on tensor cores) and accumulate in fp32;
operands padded along K are masked to zero first. A batched product is
reshaped to one 2-d dot when the right operand has a single batch, else to
3-d operands (:func:`batched_dot_operands`). A matmul the plan fuses into a
plain accumulator adds into it (``triton_plan.fused_accums``); one marked
``fma`` multiplies and ``tl.sum`` instead, and one marked ``defer`` adds its
product terms into its accumulator and sums over K after the loop.
Either keeps 2-d terms for a product of one row (:func:`one_row_product`,
:func:`column_terms`).
"""

from __future__ import annotations

from dataclasses import replace
from math import prod

from xdsl.dialects.builtin import StringAttr

from mirage_xdsl.dialects import block
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import Phase
from mirage_xdsl.lowering.triton_accums import AccumPrinter
from mirage_xdsl.lowering.triton_legalize import MATMUL_ATTR
from mirage_xdsl.lowering.triton_plan import KernelPlan
from mirage_xdsl.lowering.triton_values import (
    TRITON_DTYPES,
    Padding,
    Value,
    dtype_name,
    shape_str,
)


class MatmulPrinter(AccumPrinter):
    """Prints the matmuls of a kernel (see the module's docstring)."""

    plan: KernelPlan
    """What was decided before printing; set by the kernel printer."""

    def dot_operand(self, v: Value, k_dim: int, phase: Phase) -> Value:
        if v.padded[k_dim] > v.real[k_dim]:
            v = self.masked(v, phase)
        return v

    def print_matmul(self, op: block.MatmulOp) -> None:
        phase = self.phases[op.results[0]]
        rank = len(t.tensor_shape(op.results[0]))
        a = self.dot_operand(self.values[op.lhs], rank - 1, phase)
        b = self.dot_operand(self.values[op.rhs], rank - 2, phase)
        batch_dims = zip(a.padded[:-2], b.padded[:-2], strict=True)
        natural = (*(max(x, y) for x, y in batch_dims), a.padded[-2], b.padded[-1])
        padding = Padding.zero_if(a.clean and b.clean)
        # a ``defer`` matmul the plan could not defer (its product is the
        # same every iteration) is summed where it is computed, as ``fma``
        if op.attributes.get(MATMUL_ATTR) in (StringAttr("fma"), StringAttr("defer")):
            expr = one_row_product(op, a, b, natural) or (
                f"tl.sum(tl.expand_dims({a.f32}, {rank}) * "
                f"tl.expand_dims({b.f32}, {rank - 2}), axis={rank - 1})"
            )
            self.define(op, phase, expr, natural, padding)
            return
        elem = TRITON_DTYPES[dtype_name(op.lhs)]
        xa = a.name if a.native else f"{a.name}.to({elem})"
        xb = b.name if b.native else f"{b.name}.to({elem})"
        if rank > 2:
            xa, xb = batched_dot_operands(a, b, xa, xb)
        accum = self.plan.fused_accums.get(op)
        if accum is not None and rank == 2:
            result = accum.results[0]
            acc = self.values[result].name
            self.values[result] = replace(self.values[result], padding=padding)
            self.emit(
                phase,
                f"{acc} = tl.dot({xa}, {xb}, {acc})  # {op.name} into {accum.name}",
            )
            return
        expr = f"tl.dot({xa}, {xb})"
        if rank > 2:
            expr = f"tl.reshape({expr}, {shape_str(natural)})"
        self.define(op, phase, expr, natural, padding)

    def print_deferred_matmul(
        self, op: block.MatmulOp, accum: block.ForloopAccumOp
    ) -> None:
        """A 2-d matmul (form ``defer``) summed over the for-loop: its
        accumulator holds the ``M × K × N`` product terms, each iteration adds
        the new ones (no sum across threads inside the loop) and the sum over
        K is taken once, after it. One row by a weight read transposed keeps
        them as ``N × K``, the weight's own order (:func:`column_terms`)."""
        a = self.dot_operand(self.values[op.lhs], 1, Phase.LOOP)
        b = self.dot_operand(self.values[op.rhs], 0, Phase.LOOP)
        m, k, n = a.padded[0], a.padded[1], b.padded[1]
        terms = self.fresh("terms")
        acc = self.fresh("acc")
        if column_terms(op, m):
            shape = (n, k)
            product = f"tl.permute({b.f32}, (1, 0)) * {a.f32}"
            summed = f"tl.expand_dims(tl.sum({terms}, axis=1), 0)"
        else:
            shape = (m, k, n)
            product = f"tl.expand_dims({a.f32}, 2) * tl.expand_dims({b.f32}, 0)"
            summed = f"tl.sum({terms}, axis=1)"
        self.emit(
            Phase.INVARIANT,
            f"{terms} = tl.zeros({shape_str(shape)}, dtype=tl.float32)  "
            f"# {accum.name} none, of {op.name} terms",
        )
        self.emit(
            Phase.LOOP,
            f"{terms} += {product}  # {op.name}, summed over K after the loop",
        )
        self.emit(Phase.POST, f"{acc} = {summed}")
        padding = Padding.zero_if(a.clean and b.clean)
        value = Value(
            name=acc,
            real=t.tensor_shape(accum.result),
            padded=(m, n),
            padding=padding,
            dtype=dtype_name(accum.result),
        )
        self.values[accum.result] = self.to_shape(
            value, self.tile_of(accum), Phase.POST
        )


def one_row_product(
    op: block.MatmulOp, a: Value, b: Value, natural: tuple[int, ...]
) -> str | None:
    """A multiply-and-sum of one row (every batch dim 1) by ``b`` as 2-d
    terms: ``N × K`` where ``b`` is a transposed load (:func:`column_terms`,
    summed along its rows), else ``K × N`` with the row as a column (summed
    along its columns). None for any other product."""
    if a.padded[-2] != 1 or prod(a.padded[:-2]) != 1 or prod(b.padded[:-2]) != 1:
        return None
    k, n = b.padded[-2:]
    row = a.f32 if len(a.padded) == 2 else f"tl.reshape({a.f32}, (1, {k}))"
    mat = b.f32 if len(b.padded) == 2 else f"tl.reshape({b.f32}, ({k}, {n}))"
    if column_terms(op, 1):
        summed = f"tl.sum(tl.permute({mat}, (1, 0)) * {row}, axis=1)"
    else:
        summed = f"tl.sum({mat} * tl.permute({row}, (1, 0)), axis=0)"
    return f"tl.reshape({summed}, {shape_str(natural)})"


def column_terms(op: block.MatmulOp, rows: int) -> bool:
    """Whether a deferred product of one row keeps its terms ``N × K``: its
    weight tile is a transposed load (each column's ``K`` values contiguous,
    loaded so and permuted in registers), whose own order this is. Each
    column's terms then sum along the dim its threads hold contiguously, and
    the one row broadcasts along ``N``; ``M × K × N`` terms of a single row
    lay the tile out across threads far worse (kernels of both forms over
    the same one-column tiles, timed on an H100: 17.0 µs for 8192 → 2048,
    14.3 µs as ``N × K``)."""
    load = op.rhs.owner
    return (
        rows == 1 and isinstance(load, block.InputOp) and load.swapped_dims is not None
    )


def batched_dot_operands(a: Value, b: Value, xa: str, xb: str) -> tuple[str, str]:
    """The operands of one ``tl.dot`` for a batched product: one 2-d dot when
    ``b`` has a single batch (``a``'s batches become rows; a weight shared by
    every batch is read once), else 3-d operands, a single-batch ``a``
    broadcast to ``b``'s batches."""
    batch_a, batch_b = prod(a.padded[:-2]), prod(b.padded[:-2])
    if batch_b == 1:
        shape_a = (batch_a * a.padded[-2], a.padded[-1])
        shape_b = tuple(b.padded[-2:])
        return (
            f"tl.reshape({xa}, {shape_str(shape_a)})",
            f"tl.reshape({xb}, {shape_str(shape_b)})",
        )
    xa = f"tl.reshape({xa}, {shape_str((batch_a, *a.padded[-2:]))})"
    if batch_a == 1:
        xa = f"tl.broadcast_to({xa}, {shape_str((batch_b, *a.padded[-2:]))})"
    return xa, f"tl.reshape({xb}, {shape_str((batch_b, *b.padded[-2:]))})"
