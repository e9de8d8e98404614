"""One legalised ``kernel.customized`` op as a ``@triton.jit`` kernel.

The kernel follows the block graph's phases (``dialects/block_structure.py``):
loop-invariant tiles are loaded and computed once, fp32 accumulators are
zeroed, the for-loop loads its per-iteration tiles and updates the
accumulators, and the ops after the loop finish them and store the outputs,
each placed by its ``omap``. Every value is a register tensor of its padded
shape (``triton.tile``, set by ``legalize-for-triton``): loads fill padding
with zeros under a mask, stores mask it away.

Padding must not leak into real lanes. It can only do so through a sum over a
padded dim (``reduce_sum``, a sum/mean/rms accumulator, ``rms_norm``, a
matmul's K), so the printer tracks which values are *clean* (zero in every
padded lane: loads, and what matmuls and the zero-preserving ops of the op
table, ``OpSpec.zero_preserving``, make of clean values) and masks the others
to zero before such a sum. An element-wise op prints from its op table entry
(``OpSpec.triton``).

Arithmetic is fp32; ``tl.dot`` operands are cast to the tile's element type
(f16 or bf16 run on tensor cores) and accumulate in fp32, as the interpreter's
reference does. Matmuls marked ``fma`` multiply and ``tl.sum`` instead.

Every kernel opens with ``gdc_launch_dependents()`` and calls ``gdc_wait()``
under the module's ``GRID_DEPENDENCY`` (grid dependency control, sm_90: on
when the runtime compiles the kernels, off in the module as printed, so it
runs anywhere): it lets the next kernel's blocks start early, and reads
nothing another kernel wrote before the kernel ahead of it in the stream has
finished, so the runtime may launch it programmatically and hide the launch
latency between a µGraph's kernels. Both are no-ops for a plain launch.

What a kernel computes from the program's own inputs alone, which no kernel
writes, it computes before the wait (``triton_plan.early_ops``): the loads and
partial sums of those inputs then overlap the kernel ahead. A split-K combine
sums the squares of X's row for RMSNorm there, while the partial products are
still being made. The early part has its own pass of the for-loop; stores, and
any per-iteration value that something after the wait uses, stay after it.

The printer is split by concept: ``triton_values`` (what is known of a value,
its padding, and the tile moves every op printer makes), ``triton_buffers``
(the named buffers a kernel's lines go to), ``triton_plan`` (what is decided
before printing: fused accumulators, the early ops, the scratch layout),
``triton_accums`` (the for-loop accumulators), ``triton_matmul`` (matmuls as
``tl.dot``, batched or fused into an accumulator) and this module (the other
ops, and the kernel assembled from its buffers).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from math import prod

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import Phase
from mirage_xdsl.ir.diagnostics import OpVerifyError
from mirage_xdsl.lowering import triton_loops
from mirage_xdsl.lowering.triton_buffers import IndentedBuffer
from mirage_xdsl.lowering.triton_legalize import MATMUL_ATTR
from mirage_xdsl.lowering.triton_loops import ahead_mask, loop_range
from mirage_xdsl.lowering.triton_matmul import MatmulPrinter
from mirage_xdsl.lowering.triton_plan import plan_kernel, reads_program_input
from mirage_xdsl.lowering.triton_values import (
    TRITON_DTYPES,
    Padding,
    Value,
    arange,
    dtype_name,
    float_literal,
    row_major_strides,
    scaled,
    tile_offsets,
    valid_mask,
)
from mirage_xdsl.ops import OPS
from mirage_xdsl.search.cost_model import unrolled

POINTER_TYPES = {"f16": "*fp16", "bf16": "*bf16", "f32": "*fp32"}
INT32_LIMIT = 1 << 31


class KernelPrinter(MatmulPrinter):
    """Prints one customized op; ``print()`` returns the kernel's source."""

    def __init__(self, op: kernel.CustomizedOp, name: str) -> None:
        super().__init__(op)
        self.name = name
        self.arg_names = {a: f"in{i}" for i, a in enumerate(op.entry.args)}
        self.params = [*self.arg_names.values()]
        self.params += [f"out{j}" for j in range(len(op.results))]
        self.wide = any(
            prod(t.tensor_shape(v)) >= INT32_LIMIT for v in [*op.operands, *op.results]
        )
        outputs = [o for o in op.entry.ops if isinstance(o, block.OutputOp)]
        self.output_index = {o: i for i, o in enumerate(outputs)}
        """Each ``block.output``'s result number."""
        self.plan = plan_kernel(op, self.phases)
        self.printed_by_matmul = {
            *self.plan.fused_accums.values(),
            *self.plan.deferred_accums.values(),
        }
        """Accumulators their matmul prints (``tl.dot`` into them, or its
        deferred product terms)."""

    # -- ops ----------------------------------------------------------------

    def streamed(self, op: block.InputOp) -> bool:
        """Whether a load streams a program input (a weight) that no other
        block reads: a tile per iteration of the loop, every grid dim of more
        than one block mapped to a dim of it. L2 gains nothing by keeping
        those lines, so they go first (``evict_first``), and what several
        blocks read stays."""
        return (
            op.forloop_dim >= 0
            and self.forloop > 1
            and all(m >= 0 for g, m in enumerate(op.input_map) if self.grid[g] > 1)
            and reads_program_input(self.op, op)
        )

    def eviction(self, op: block.InputOp) -> str:
        """The L2 eviction policy of a tile's load: ``evict_first`` for a
        streamed weight (:meth:`streamed`); ``evict_last`` in a kernel that
        loads its whole tiles once, with no for-loop and no matmul (a
        row-wise program: a norm, a softmax, an element-wise chain), which
        on an H100 after an L2 flush took 0.1-0.45 µs less per call that way
        (l2norm over one row of 2048: 1.95 against 1.75 µs; add + RMSNorm
        over 16 rows: 2.32 against 1.89, at 4 warps); else none."""
        if self.streamed(op):
            return "evict_first"
        if self.forloop == 1 and not any(
            isinstance(o, block.MatmulOp) for o in self.op.entry.ops
        ):
            return "evict_last"
        return ""

    def loaded_ahead(self, op: block.InputOp) -> bool:
        """Whether ``op``'s tile is loaded one iteration ahead: a
        per-iteration tile of the part after the wait, in a loop that
        loads ahead (:attr:`loop_loads_ahead`)."""
        return (
            not self.early
            and self.phases[op.result] == Phase.LOOP
            and self.loop_loads_ahead
        )

    @cached_property
    def loop_loads_ahead(self) -> bool:
        """Whether the for-loop loads its tiles one iteration ahead
        (``triton_loops.loads_ahead``): a rolled loop with no ``tl.dot``
        (Triton pipelines a ``tl.dot``'s loads itself)."""
        return (
            not self.dot_in_loop()
            and not self.unrolled()
            and triton_loops.loads_ahead(self.forloop, self.loop_elements())
        )

    def dot_in_loop(self) -> bool:
        """Whether a matmul of the for-loop prints as ``tl.dot``."""
        plain = (StringAttr("fma"), StringAttr("defer"))
        return any(
            isinstance(o, block.MatmulOp)
            and self.phases[o.results[0]] == Phase.LOOP
            and o.attributes.get(MATMUL_ATTR) not in plain
            for o in self.op.entry.ops
        )

    def print_input(self, op: block.InputOp) -> None:
        full = op.viewed_shape  # a lifted tile's leading size-1 dims index 0
        real = t.tensor_shape(op.result)
        padded = self.tile_of(op)
        source = t.tensor_shape(op.source)
        lifted_by = len(full) - len(source)
        window = op.window_of
        strides = tuple(row_major_strides((1,) * lifted_by + source))
        order = list(range(len(full)))
        if op.swapped_dims is not None:
            # the view's dims a, b are b, a in memory: load the tile in memory
            # order (whole runs of the contiguous dim, as vectors) and permute
            # it in registers
            a, b = (d + lifted_by for d in op.swapped_dims)
            order[a], order[b] = order[b], order[a]
        # the tile in memory order: a swap is its own inverse
        in_memory = tuple(padded[d] for d in order)
        mask = valid_mask(tuple(real[d] for d in order), in_memory)
        param = self.arg_names[op.source]  # type: ignore[index]

        def load(iteration: str, mask: str | None) -> str:
            """The tile's load at the for-loop's iteration ``iteration``."""
            starts = [
                [
                    scaled(f"pid{g}", full[d] // self.grid[g])
                    for g, m in enumerate(op.input_map)
                    if m == d and self.grid[g] > 1
                ]
                + (
                    [scaled(iteration, real[d])]
                    if op.forloop_dim == d and iteration != "0"
                    else []
                )
                for d in range(len(full))
            ]
            if window is not None and window[1]:  # a window starts inside its dim
                starts[window[0] + lifted_by].append(str(window[1]))
            offsets = tile_offsets(
                tuple(full[d] for d in order),
                in_memory,
                [starts[d] for d in order],
                strides,
            )
            text = f"tl.load({param} + {offsets}"
            text += f", mask={mask}, other=0.0" if mask else ""
            if policy := self.eviction(op):
                text += f", eviction_policy='{policy}'"
            return text + ")"

        def permuted(tile: str) -> str:
            return (
                f"tl.permute({tile}, {tuple(order)})"
                if order != sorted(order)
                else tile
            )

        phase = self.phases[op.result]
        name = self.fresh("x")
        comment = f"  # {param} imap {list(op.input_map)} fmap {op.forloop_dim}" + (
            "" if op.swapped_dims is None else f" transpose {list(op.swapped_dims)}"
        )
        if self.loaded_ahead(op):
            # the first tile before the loop: before the wait where no kernel
            # writes it
            ahead = self.fresh("a")
            first = self.body.invariant
            if reads_program_input(self.op, op):
                first = self.body.early_invariant
            first.writeline(f"{ahead} = {load('0', mask)}{comment}, iteration 0")
            self.emit(phase, f"{name} = {permuted(ahead)}")
            next_tile = load("(it + 1)", ahead_mask(mask, self.forloop))
            self.emit(phase, f"{ahead} = {next_tile}  # the next iteration's")
        else:
            self.emit(phase, f"{name} = {permuted(load('it', mask))}{comment}")
        self.values[op.result] = Value(
            name=name,
            real=real,
            padded=padded,
            padding=Padding.ZERO,
            dtype=dtype_name(op.result),
            native=True,
        )

    def print_output(self, op: block.OutputOp, index: int) -> None:
        v = self.values[op.input]
        phase = self.phases[op.input]
        out = self.op.results[index]
        full = t.tensor_shape(out)
        starts = [
            [
                scaled(f"pid{g}", v.real[d])
                for g, m in enumerate(op.output_map)
                if m == d and self.grid[g] > 1
            ]
            for d in range(len(full))
        ]
        offsets = tile_offsets(full, v.padded, starts)
        mask = valid_mask(v.real, v.padded)
        value = f"{v.name}.to({TRITON_DTYPES[dtype_name(out)]})"
        store = f"tl.store(out{index} + {offsets}, {value}"
        store += f", mask={mask})" if mask else ")"
        target = Phase.POST if phase == Phase.INVARIANT and self.forloop > 1 else phase
        self.emit(target, f"{store}  # omap {list(op.output_map)}")

    def broadcast_operands(
        self, op: t.TensorOp, phase: Phase
    ) -> tuple[list[Value], tuple[int, ...]]:
        """``op``'s operands as Triton broadcasts them to its tile, and the
        shape broadcasting gives the result."""
        padded = self.tile_of(op)
        real = t.tensor_shape(op.results[0])
        args = [
            self.broadcastable(self.values[v], real, padded, phase) for v in op.operands
        ]
        natural = tuple(max(s) for s in zip(*(a.padded for a in args), strict=True))
        return args, natural

    def print_elementwise(self, op: t.TensorOp) -> None:
        """An element-wise op of the op table, from its ``triton`` template.
        The result is clean when the op maps 0 to 0, its operands are clean and
        none broadcasts a real extent 1 into padded lanes."""
        spec = OPS.get(op.KIND)
        if spec is None or not spec.elementwise or spec.triton is None:
            raise OpVerifyError(op, f"'{op.name}' has no Triton lowering")
        phase = self.phases[op.results[0]]
        real = t.tensor_shape(op.results[0])
        args, natural = self.broadcast_operands(op, phase)
        x = args[0].f32
        y = args[1].f32 if len(args) > 1 else ""
        c = float_literal(op.value) if isinstance(op, t.ScalarOp) else ""
        expr = spec.triton_expr(x, y, c)
        spills = any(
            a.padded[d] == 1 and natural[d] > real[d]
            for a in args
            for d in range(len(real))
        )
        clean = spec.zero_preserving and all(a.clean for a in args) and not spills
        self.define(op, phase, expr, natural, Padding.zero_if(clean))

    def print_rms_norm(self, op: t.RmsNormBase) -> None:
        """``x / sqrt(sum(x^2) / n + eps)`` over the last dim, summing real
        lanes only, squared and summed in fp32 (a 16-bit square overflows past
        256 in f16 and keeps 8 bits in bf16). Padded rows divide by
        ``sqrt(eps)`` (0 / 0 without an eps), so the result is not taken to be
        clean."""
        phase = self.phases[op.result]
        real = t.tensor_shape(op.result)
        args, natural = self.broadcast_operands(op, phase)
        m = self.masked(args[0], phase)
        r = self.fresh("r")
        eps = f" + {float_literal(op.eps_value)}" if op.eps_value else ""
        self.emit(
            phase,
            f"{r} = tl.sqrt(tl.sum({m.f32} * {m.f32}, "
            f"axis={len(real) - 1}, keep_dims=True) / {real[-1]}.0{eps})",
        )
        self.define(op, phase, f"{args[0].f32} / {r}", natural, Padding.ANY)

    def print_reduce(self, op: t.ReduceSumBase) -> None:
        phase = self.phases[op.result]
        dim = op.dim.value.data
        v = self.values[op.input]
        if v.padded[dim] > v.real[dim]:
            v = self.masked(v, phase)
        natural = tuple(1 if d == dim else p for d, p in enumerate(v.padded))
        expr = f"tl.sum({v.f32}, axis={dim}, keep_dims=True)"
        self.define(op, phase, expr, natural, v.padding)

    def print_reduce_max(self, op: t.ReduceMaxBase) -> None:
        """``tl.max`` over ``dim`` in fp32. Padded lanes of that dim are -inf,
        so they never win; lanes padded along other dims keep their values,
        so a clean operand gives a clean result (the maximum of zeros)."""
        phase = self.phases[op.result]
        dim = op.dim.value.data
        v = self.values[op.input]
        x = v.f32
        rank = len(v.padded)
        if v.padded[dim] > v.real[dim]:
            keep = f"{arange(v.padded[dim], dim, rank)} < {v.real[dim]}"
            x = f"tl.where({keep}, {x}, float('-inf'))"
        natural = tuple(1 if d == dim else p for d, p in enumerate(v.padded))
        expr = f"tl.max({x}, axis={dim}, keep_dims=True)"
        self.define(op, phase, expr, natural, v.padding)

    def print_transpose(self, op: block.TransposeOp) -> None:
        """``tl.permute`` of the register tile: the padded dims move with the
        real ones (``triton_tiles`` ties them), so padding stays padding and the
        value keeps its element type and cleanliness."""
        phase = self.phases[op.result]
        v = self.values[op.input]
        a, b = op.dims
        order = list(range(len(v.padded)))
        order[a], order[b] = b, a
        name = self.fresh("v")
        self.emit(phase, f"{name} = tl.permute({v.name}, {tuple(order)})  # {op.name}")
        natural = tuple(v.padded[d] for d in order)
        real = t.tensor_shape(op.result)
        moved = replace(v, name=name, real=real, padded=natural)
        self.values[op.result] = self.to_shape(moved, self.tile_of(op), phase)

    def block_index(self) -> str:
        """This block's linear index (x fastest)."""
        gx, gy, _ = self.grid
        terms = []
        if self.grid[0] > 1:
            terms.append("pid0")
        if self.grid[1] > 1:
            terms.append(f"pid1 * {gx}")
        if self.grid[2] > 1:
            terms.append(f"pid2 * {gx * gy}")
        return " + ".join(terms) or "0"

    @staticmethod
    def scratch_offsets(
        real: tuple[int, ...], padded: tuple[int, ...], dim: int, shift: int
    ) -> str:
        """Offsets into a scratch tile of shape ``real`` of a padded piece
        placed ``shift`` along ``dim``."""
        starts = [[str(shift)] if d == dim and shift else [] for d in range(len(real))]
        return tile_offsets(real, padded, starts)

    def print_concat(self, op: t.ConcatBase) -> None:
        """Concatenation through this block's slice of a global scratch buffer.

        Register tensors cannot be concatenated in place, so both pieces are
        stored where they belong in the result tile and the tile is loaded
        back, with a block barrier before (earlier readers are done) and after
        (every piece is written). Matmuls of concatenations never get here:
        ``legalize-for-triton`` splits them into sums of dots.
        """
        phase = self.phases[op.result]
        dim = op.dim.value.data
        padded = self.tile_of(op)
        real = t.tensor_shape(op.result)
        rank = len(padded)
        base = self.fresh("s")
        self.emit(
            phase,
            f"{base} = scratch + ({self.block_index()}) * {self.plan.scratch_elems}"
            f" + {self.plan.scratch_start[op]}",
        )
        self.emit(phase, "tl.debug_barrier()")
        shift = 0
        for v in op.operands:
            part = self.values[v]
            want = tuple(part.padded[d] if d == dim else padded[d] for d in range(rank))
            part = self.to_shape(part, want, phase)
            offsets = self.scratch_offsets(real, part.padded, dim, shift)
            mask = valid_mask(part.real, part.padded)
            store = f"tl.store({base} + {offsets}, {part.f32}"
            self.emit(phase, store + (f", mask={mask})" if mask else ")"))
            shift += part.real[dim]
        self.emit(phase, "tl.debug_barrier()")
        mask = valid_mask(real, padded)
        load = f"tl.load({base} + {self.scratch_offsets(real, padded, dim, 0)}"
        load += f", mask={mask}, other=0.0)" if mask else ")"
        self.define(op, phase, load, padded, Padding.ZERO)

    # -- whole kernel -------------------------------------------------------

    def print(self) -> str:
        for op in self.op.entry.ops:
            self.early = op in self.plan.early
            self.print_op(op)
        return self.assemble()

    def print_op(self, op: Operation) -> None:
        """Print one op of the block graph."""
        if isinstance(op, block.InputOp):
            self.print_input(op)
        elif isinstance(op, block.OutputOp):
            self.print_output(op, self.output_index[op])
        elif isinstance(op, block.ForloopAccumOp):
            if op not in self.printed_by_matmul:
                self.print_accum(op)
        elif isinstance(op, block.MatmulOp):
            if op in self.plan.fused_accums:
                self.print_fused_accum(self.plan.fused_accums[op])
            if op in self.plan.deferred_accums:
                self.print_deferred_matmul(op, self.plan.deferred_accums[op])
            else:
                self.print_matmul(op)
        elif isinstance(op, t.ReduceSumBase):
            self.print_reduce(op)
        elif isinstance(op, t.ReduceMaxBase):
            self.print_reduce_max(op)
        elif isinstance(op, t.ConcatBase):
            self.print_concat(op)
        elif isinstance(op, block.TransposeOp):
            self.print_transpose(op)
        elif isinstance(op, t.RmsNormBase):
            self.print_rms_norm(op)
        elif isinstance(op, t.TensorOp):
            self.print_elementwise(op)
        else:
            raise OpVerifyError(
                op,
                f"'{op.name}' has no Triton lowering; run legalize-for-triton first",
            )

    def assemble(self) -> str:
        """The kernel: its header, the grid dependency control and the body's
        buffers joined in order."""
        grid, forloop = self.grid, self.forloop
        params = self.params + (["scratch"] if self.plan.scratch_elems else [])
        code = IndentedBuffer()
        code.writeline("@triton.jit")
        code.writeline(f"def {self.name}({', '.join(params)}):")
        with code.indent():
            code.writeline(f'"""grid {list(grid)}, for-loop {forloop}."""')
            self.write_gdc(code, "gdc_launch_dependents()")
            for g in (g for g in range(3) if grid[g] > 1):
                pid = f"tl.program_id({g})"
                code.writeline(
                    f"pid{g} = {pid}.to(tl.int64)" if self.wide else f"pid{g} = {pid}"
                )
            code.splice(self.body.early_invariant)
            self.write_loop(code, self.body.early_loop)
            self.write_gdc(code, "gdc_wait()")
            code.splice(self.body.invariant)
            self.write_loop(code, self.body.loop, self.body.loop_tail)
            code.splice(self.body.post)
        return code.getvalue() + "\n"

    def unrolled(self) -> bool:
        """Whether the for-loop is short, multiplies nothing and loads few
        enough elements over all its iterations (``cost_model.unrolled``)."""
        ops = list(self.op.entry.ops)
        matmul = any(
            isinstance(o, block.MatmulOp) and self.phases[o.results[0]] == Phase.LOOP
            for o in ops
        )
        return unrolled(self.forloop, matmul, self.loop_elements())

    def loop_elements(self) -> int:
        """Elements a block loads per iteration of the for-loop."""
        return sum(
            prod(self.tile_of(o))
            for o in self.op.entry.ops
            if isinstance(o, block.InputOp) and o.forloop_dim != -1
        )

    @staticmethod
    def write_gdc(code: IndentedBuffer, call: str) -> None:
        """``call`` under the module's ``GRID_DEPENDENCY``."""
        code.writeline("if GRID_DEPENDENCY:")
        with code.indent():
            code.writeline(call)

    def write_loop(self, code: IndentedBuffer, *parts: IndentedBuffer) -> None:
        """``parts`` as the body of the kernel's for-loop (none if all are
        empty); a loop the cost model takes to be unrolled is unrolled, so
        all its loads are in flight at once (``triton_loops``)."""
        if not any(parts):
            return
        if self.forloop > 1:
            code.writeline(f"for it in {loop_range(self.forloop, self.unrolled())}:")
            with code.indent():
                for part in parts:
                    code.splice(part)
            return
        code.writeline("it = 0")
        for part in parts:
            code.splice(part)


@dataclass(frozen=True)
class PrintedKernel:
    source: str
    scratch_elems: int
    """fp32 scratch per block; when non-zero the kernel takes a last
    ``scratch`` pointer to ``blocks x scratch_elems`` floats."""


def print_kernel(op: kernel.CustomizedOp, name: str) -> PrintedKernel:
    """The ``@triton.jit`` source of a legalised customized op."""
    printer = KernelPrinter(op, name)
    source = printer.print()
    return PrintedKernel(source, printer.plan.scratch_elems)


def kernel_source(op: kernel.CustomizedOp, name: str) -> str:
    return print_kernel(op, name).source


def signature(op: kernel.CustomizedOp) -> dict[str, str]:
    """Parameter types of the kernel, in order (Triton's ``ASTSource`` signature)."""
    values = [*op.operands, *op.results]
    names = [f"in{i}" for i in range(len(op.operands))]
    names += [f"out{j}" for j in range(len(op.results))]
    return {n: POINTER_TYPES[dtype_name(v)] for n, v in zip(names, values, strict=True)}
