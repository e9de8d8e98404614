"""The for-loop accumulators of a Triton kernel.

A ``block.forloop_accum`` whose input changes per iteration is a loop-carried
fp32 tensor: zeroed before the loop, updated in it (summed, or with a shift,
rescaled to the running maximum as the online softmax does) and, for a mean
or an RMS, finished after it. One whose input is the same every iteration is
computed once after the loop. A matmul whose only user is a plain
accumulator adds into it with ``tl.dot`` (``print_fused_accum``).
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import Phase
from mirage_xdsl.lowering.triton_values import (
    Padding,
    TileKernel,
    Value,
    dtype_name,
    shape_str,
)


class AccumPrinter(TileKernel):
    """Prints the accumulators of a kernel (see the module's docstring)."""

    def __init__(self, op: kernel.CustomizedOp) -> None:
        super().__init__(op)
        self.shift_weight_names: dict[SSAValue, tuple[str, str]] = {}
        """Per shift of a shifted accumulation: the names of this iteration's
        weights for the old sums and the new term (``shift_weights``)."""

    def print_fused_accum(self, op: block.ForloopAccumOp) -> None:
        """The zeroed accumulator a matmul adds into with ``tl.dot``."""
        padded = self.tile_of(op)
        acc = self.fresh("acc")
        self.emit(
            Phase.INVARIANT,
            f"{acc} = tl.zeros({shape_str(padded)}, dtype=tl.float32)  "
            f"# {op.name} none, fed by tl.dot",
        )
        self.values[op.result] = Value(
            name=acc,
            real=t.tensor_shape(op.result),
            padded=padded,
            padding=Padding.ANY,
            dtype=dtype_name(op.result),
        )

    def shift_weights(self, shift: SSAValue) -> tuple[str, str]:
        """This iteration's weights for a shift: ``exp(run - new)`` for what
        is summed so far and ``exp(shift - new)`` for the new term, ``new``
        being the running maximum with this iteration's shift included.

        Accumulators with the same shift share the running maximum; it takes
        its new value at the end of the iteration, after all of them read the
        old one."""
        if shift not in self.shift_weight_names:
            m = self.values[shift]
            m = self.to_shape(m, self.tile_of(shift.owner), Phase.LOOP)  # type: ignore[arg-type]
            run, new = self.fresh("run"), self.fresh("top")
            old_w, new_w = self.fresh("wold"), self.fresh("wnew")
            self.emit(
                Phase.INVARIANT,
                f"{run} = tl.full({shape_str(m.padded)}, float('-inf'), tl.float32)"
                "  # running maximum of a shift",
            )
            self.emit(Phase.LOOP, f"{new} = tl.maximum({run}, {m.f32})")
            self.emit(Phase.LOOP, f"{old_w} = tl.exp({run} - {new})")
            self.emit(Phase.LOOP, f"{new_w} = tl.exp({m.f32} - {new})")
            self.body.loop_tail.writeline(f"{run} = {new}")
            self.shift_weight_names[shift] = (old_w, new_w)
        return self.shift_weight_names[shift]

    def print_shifted_accum(self, op: block.ForloopAccumOp) -> None:
        """The online softmax's accumulation: every iteration scales the sum
        so far by ``exp(run - new)`` and adds the new term scaled by
        ``exp(shift - new)``, so it always holds the terms weighted by
        ``exp(shift_t - running maximum)``; after the loop the maximum is the
        shift's maximum over all iterations, as ``block.forloop_accum`` says.

        Padded rows may hold any finite shift, so the result is not taken to
        be clean."""
        assert op.shift is not None
        x = self.values[op.input]
        padded = self.tile_of(op)
        real = t.tensor_shape(op.result)
        rank = len(real)
        acc = self.fresh("acc")
        self.emit(
            Phase.INVARIANT,
            f"{acc} = tl.zeros({shape_str(padded)}, dtype=tl.float32)  "
            f"# {op.name} {op.reduction}, shifted",
        )
        if op.reduction == "none":
            term = x.computed(x.f32)
        else:
            v = self.masked(x, Phase.LOOP) if x.padded[-1] > x.real[-1] else x
            name = self.fresh("u")
            self.emit(
                Phase.LOOP, f"{name} = tl.sum({v.f32}, axis={rank - 1}, keep_dims=True)"
            )
            term = Value(
                name=name,
                real=real,
                padded=(*v.padded[:-1], 1),
                padding=v.padding,
                dtype=x.dtype,
            )
        term = self.to_shape(term, padded, Phase.LOOP)
        old_w, new_w = self.shift_weights(op.shift)
        self.emit(Phase.LOOP, f"{acc} = {acc} * {old_w} + {term.f32} * {new_w}")
        self.values[op.result] = Value(
            name=acc,
            real=real,
            padded=padded,
            padding=Padding.ANY,
            dtype=dtype_name(op.result),
        )

    def print_accum(self, op: block.ForloopAccumOp) -> None:
        """A ``block.forloop_accum`` (the module's docstring says how)."""
        if op.shift is not None and Phase.LOOP in (
            self.phases[op.input],
            self.phases[op.shift],
        ):
            self.print_shifted_accum(op)
            return
        # A shift that is the same on every iteration weights each by 1.
        x = self.values[op.input]
        source_phase = self.phases[op.input]
        padded = self.tile_of(op)
        real = t.tensor_shape(op.result)
        rank = len(real)
        kind = op.reduction
        last = x.real[-1]

        def reduced(v: Value, phase: Phase) -> tuple[str, tuple[int, ...], Padding]:
            if kind == "none":
                return v.f32, v.padded, v.padding
            v = self.masked(v, phase) if v.padded[-1] > v.real[-1] else v
            arg = v.f32
            if kind == "rms":
                arg = f"{arg} * {arg}"
            natural = (*v.padded[:-1], 1)
            return f"tl.sum({arg}, axis={rank - 1}, keep_dims=True)", natural, v.padding

        if source_phase == Phase.LOOP:
            acc = self.fresh("acc")
            self.emit(
                Phase.INVARIANT,
                f"{acc} = tl.zeros({shape_str(padded)}, dtype=tl.float32)  "
                f"# {op.name} {kind}",
            )
            dtype = dtype_name(op.result)
            expr, natural, padding = reduced(x, Phase.LOOP)
            tmp = Value(
                name=self.fresh("u"),
                real=real,
                padded=natural,
                padding=padding,
                dtype=dtype,
            )
            self.emit(Phase.LOOP, f"{tmp.name} = {expr}")
            tmp = self.to_shape(tmp, padded, Phase.LOOP)
            self.emit(Phase.LOOP, f"{acc} += {tmp.name}")
            self.values[op.result] = Value(
                name=acc, real=real, padded=padded, padding=tmp.padding, dtype=dtype
            )
            count = last * self.forloop
        else:
            expr, natural, padding = reduced(x, Phase.POST)
            scale = self.forloop if kind in ("none", "sum") else 1
            count = last
            name = self.fresh("acc")
            self.emit(
                Phase.POST, f"{name} = {expr}" + (f" * {scale}.0" if scale > 1 else "")
            )
            tmp = self.to_shape(
                Value(
                    name=name,
                    real=real,
                    padded=natural,
                    padding=padding,
                    dtype=dtype_name(op.result),
                ),
                padded,
                Phase.POST,
            )
            self.values[op.result] = tmp
        if kind in ("mean", "rms"):
            v = self.values[op.result]
            name = self.fresh("v")
            finish = f"{v.name} / {count}.0"
            self.emit(
                Phase.POST,
                f"{name} = " + (f"tl.sqrt({finish})" if kind == "rms" else finish),
            )
            self.values[op.result] = v.computed(name, padded=padded)
