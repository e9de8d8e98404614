"""Labelling a program: the abstract expression of every value of a
``func.func``, at every level (kernel, block, thread)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xdsl.ir import Operation, SSAValue

from mirage_xdsl.dialects.block_structure import Phase, phases_of
from mirage_xdsl.search.pruning.expr_terms import Expr, Shape, var
from mirage_xdsl.search.pruning.op_exprs import op_expr


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
    if "start" in op.properties:  # a slice's window
        attrs["start"] = op.start.value.data  # type: ignore[attr-defined]
        attrs["end"] = op.end.value.data  # type: ignore[attr-defined]
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
