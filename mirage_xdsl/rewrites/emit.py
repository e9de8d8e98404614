"""Emit a discovery as a PDL pattern plus a µGraph template.

The pattern matches the kernel-level DAG of a single-output function, root
first, exactly as PDL does: one ``pdl.operation`` per kernel op, operands tied
by ``pdl.result``, attributes such as ``dim`` as constants. Types are left
open when the pattern is shape-generic (the template is retargeted and
re-verified at each match) or pinned with constant ``pdl.type``s otherwise.
The rewrite is external, ``pdl.rewrite %root with "mirage.instantiate"(...)``:
a µGraph has regions, which PDL cannot build, so ``apply-mirage-rewrites``
instantiates the template named by the first argument.
"""

from __future__ import annotations

from xdsl.dialects import func, pdl
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Region, SSAValue

from mirage_xdsl.dialects import tensor_ops as t

INSTANTIATE = "mirage.instantiate"
MATCHED_ATTRIBUTES = ("dim",)
"""Op attributes a pattern pins: they change what an op computes."""


class EmitError(ValueError):
    """The discovery cannot be expressed as a pattern."""


def emit_pattern(
    source: func.FuncOp, template_name: str, shape_generic: bool = True
) -> pdl.PatternOp:
    """A ``pdl.pattern`` matching ``source``'s body, rewriting to ``template_name``."""
    ret = source.body.block.last_op
    if not isinstance(ret, func.ReturnOp) or len(ret.operands) != 1:
        raise EmitError("patterns are emitted for single-output functions")
    body = Block()

    def add(op):
        body.add_op(op)
        return op.results[0]

    def pdl_type(value: SSAValue) -> SSAValue:
        return add(pdl.TypeOp(None if shape_generic else value.type))

    values: dict[SSAValue, SSAValue] = {}
    operands = []
    for arg in source.body.block.args:
        values[arg] = add(pdl.OperandOp(pdl_type(arg)))
        operands.append(values[arg])
    root = None
    for op in source.body.block.ops:
        if isinstance(op, func.ReturnOp):
            continue
        if not isinstance(op, t.TensorOp):
            raise EmitError(f"'{op.name}' is not a kernel-level tensor op")
        names = [n for n in MATCHED_ATTRIBUTES if op.properties.get(n) is not None]
        attrs = [add(pdl.AttributeOp(op.properties[n])) for n in names]
        root = add(
            pdl.OperationOp(
                op.name,
                [StringAttr(n) for n in names],
                [values[v] for v in op.operands],
                attrs,
                [pdl_type(r) for r in op.results],
            )
        )
        for i, r in enumerate(op.results):
            values[r] = add(pdl.ResultOp(i, root))
        if ret.operands[0] in op.results:
            break
    if root is None:
        raise EmitError("nothing to match: the function has no kernel ops")
    name = add(pdl.AttributeOp(StringAttr(template_name)))
    body.add_op(pdl.RewriteOp(root, Region(), INSTANTIATE, [name, *operands]))
    return pdl.PatternOp(1, f"{template_name}_pattern", Region(body))


def library_module(entries: list[tuple[func.FuncOp, func.FuncOp, str]]) -> ModuleOp:
    """A rewrite library: each (source, optimized, name) as pattern + template.

    The template is the optimized function renamed to ``name``.
    """
    ops = []
    for source, optimized, name in entries:
        ops.append(emit_pattern(source, name))
        template = optimized.clone()
        template.sym_name = StringAttr(name)
        ops.append(template)
    return ModuleOp(ops)
