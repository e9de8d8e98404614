"""Conversion rules: one function per ATen op, building kernel-dialect ops.

:data:`ATEN_RULES` maps each supported ATen op to its rule. A rule receives
the converter, the node and the node's arguments (converted nodes stay fx
nodes; :meth:`Converter.value` gives their SSA value) and returns the node's
value: an SSA value, or a :class:`Partial` piece of a fused op (see
:mod:`mirage_xdsl.torch.capture`).

The rules are grouped by concept: :mod:`.operands` (the values rules pass
around), :mod:`.arith`, :mod:`.norms`, :mod:`.reductions`, :mod:`.linear`,
:mod:`.layout`, :mod:`.slicing`, :mod:`.masks` and :mod:`.attention`; this
module holds the table.
"""

from __future__ import annotations

import operator
from typing import Any

from mirage_xdsl.ops import OPS, Form
from mirage_xdsl.torch.nodes import aten
from mirage_xdsl.torch.rules.activations import (
    abs_,
    celu,
    elu,
    exp2,
    glu,
    hardsigmoid,
    hardswish,
    leaky_relu,
    log_sigmoid,
    mish,
    selu,
)
from mirage_xdsl.torch.rules.arith import (
    add,
    addcmul,
    clamp,
    clamp_max,
    clamp_min,
    div,
    elementwise,
    gelu,
    hardtanh,
    lerp,
    mul,
    reciprocal,
    relu6,
    rsub,
    sigmoid,
    softplus,
    sub,
    unary,
)
from mirage_xdsl.torch.rules.attention import sdpa
from mirage_xdsl.torch.rules.layout import (
    dropout,
    identity,
    repeat,
    shape_change,
    swaps,
    view_as_real,
)
from mirage_xdsl.torch.rules.linear import addmm, linear, matmul
from mirage_xdsl.torch.rules.masks import compare, logical_not, masked_fill, where
from mirage_xdsl.torch.rules.norms import (
    adaptive_avg_pool,
    cosine_similarity,
    group_norm,
    layer_norm,
    mean,
    pow_,
    rms_norm,
    rsqrt,
    sqrt,
    square,
    variance,
    vector_norm,
)
from mirage_xdsl.torch.rules.operands import (
    Empty,
    Expanded,
    MaskedScores,
    MaxWithIndices,
    Parameter,
    Partial,
    Rule,
    Value,
    materialise_expand,
)
from mirage_xdsl.torch.rules.reductions import (
    amax,
    getitem,
    log_softmax,
    logsumexp,
    max_,
    reduce_sum,
    softmax,
)
from mirage_xdsl.torch.rules.slicing import (
    cat,
    chunk,
    constant_pad,
    pad_,
    repeat_interleave,
    select,
    slice_,
    split,
    stack,
    unbind,
)

TABLE_RULES = {Form.UNARY: unary, Form.BINARY: elementwise}
"""The rule of an element-wise op of the table's form that an ATen op is
exactly (:attr:`OpSpec.torch`); one with a constant needs its own rule."""

ATEN_RULES: dict[Any, Rule] = {
    **{
        getattr(aten, name): TABLE_RULES[spec.form](kind)
        for kind, spec in OPS.items()
        for name in spec.torch
    },
    aten.matmul: matmul,
    aten.mm: matmul,
    aten.bmm: matmul,
    aten.linear: linear,
    aten.addmm: addmm,
    aten.baddbmm: addmm,
    aten.t: shape_change,
    aten.numpy_T: shape_change,
    aten.transpose: shape_change,
    aten.permute: shape_change,
    aten.view: shape_change,
    aten.reshape: shape_change,
    aten.unsqueeze: shape_change,
    aten.squeeze: shape_change,
    aten.flatten: shape_change,
    aten.unflatten: shape_change,
    aten._unsafe_view: shape_change,
    aten.expand: shape_change,
    aten.expand_as: shape_change,
    aten.repeat: repeat,
    aten.constant_pad_nd: constant_pad,
    aten.pad: pad_,
    aten.linalg_vector_norm: vector_norm,
    aten.var: variance,
    aten.adaptive_avg_pool1d: adaptive_avg_pool,
    aten.adaptive_avg_pool2d: adaptive_avg_pool,
    aten.std: variance,
    aten.scaled_dot_product_attention: sdpa,
    aten.add: add,
    aten.sub: sub,
    aten.rsub: rsub,
    aten.mul: mul,
    aten.div: div,
    aten.sigmoid: sigmoid,
    aten.clamp: clamp,
    aten.clip: clamp,
    aten.clamp_min: clamp_min,
    aten.clamp_max: clamp_max,
    aten.hardtanh: hardtanh,
    aten.relu6: relu6,
    aten.softplus: softplus,
    aten.abs: abs_,
    aten.leaky_relu: leaky_relu,
    aten.elu: elu,
    aten.selu: selu,
    aten.celu: celu,
    aten.hardsigmoid: hardsigmoid,
    aten.hardswish: hardswish,
    aten.mish: mish,
    aten.log_sigmoid: log_sigmoid,
    aten.exp2: exp2,
    aten.glu: glu,
    aten.lerp: lerp,
    aten.addcmul: addcmul,
    aten.logsumexp: logsumexp,
    aten.reciprocal: reciprocal,
    aten.group_norm: group_norm,
    aten.cosine_similarity: cosine_similarity,
    aten.gelu: gelu,
    aten.sqrt: sqrt,
    aten.rsqrt: rsqrt,
    aten.pow: pow_,
    aten.square: square,
    aten.mean: mean,
    aten.sum: reduce_sum,
    aten.amax: amax,
    aten.max: max_,
    operator.getitem: getitem,
    aten.softmax: softmax,
    aten.log_softmax: log_softmax,
    aten._log_softmax: log_softmax,
    aten._softmax: softmax,
    aten.rms_norm: rms_norm,
    aten.layer_norm: layer_norm,
    aten.slice: slice_,
    aten.select: select,
    aten.cat: cat,
    aten.stack: stack,
    aten.repeat_interleave: repeat_interleave,
    aten.split: split,
    aten.split_with_sizes: split,
    aten.chunk: chunk,
    aten.unbind: unbind,
    aten.where: where,
    **{getattr(aten, name): compare for name in ("eq", "ne", "lt", "le", "gt", "ge")},
    aten.masked_fill: masked_fill,
    aten.bitwise_not: logical_not,
    aten.logical_not: logical_not,
    aten.dropout: dropout,
    aten.clone: identity,
    aten.alias: identity,
    aten.detach: identity,
    aten.contiguous: identity,
    aten.to: identity,
    aten._to_copy: identity,
    aten.type_as: identity,
    aten.view_as_real: view_as_real,
}
"""ATen op (overload packet) -> conversion rule: the ATen names of the op
table's entries, then the rules written here (patterns such as SiLU, RMSNorm
and the GELUs, and ops that take constants), which win where both name one."""

FAST_PATH = (
    "torch's fused inference fast path, one native op; "
    "torch.backends.mha.set_fastpath_enabled(False) lets mirage see its parts"
)
NO_RULE = {
    aten._transformer_encoder_layer_fwd: FAST_PATH,  # nn.TransformerEncoderLayer
    aten._native_multi_head_attention: FAST_PATH,  # nn.MultiheadAttention
}
"""Why an op without a rule stays torch, where there is more to say than
that it has no kernel-dialect equivalent."""


def no_rule_reason(packet: Any, has: str = "") -> str:
    """The reason an op without a rule stays torch (``has``: ``"it has "``,
    where the phrase follows the op's name)."""
    return NO_RULE.get(packet, f"{has}no kernel-dialect equivalent")


MATERIALISED = frozenset({"square", "sigmoid"})
"""Partial kinds that are ops of their own when used outside their fused op:
``x^2`` becomes ``kernel.square``, a sigmoid outside SiLU ``kernel.sigmoid``."""

IGNORED = {aten._assert_tensor_metadata.default}
"""Checks torch.export inserts; they compute nothing."""

__all__ = [
    "ATEN_RULES",
    "no_rule_reason",
    "Empty",
    "Expanded",
    "materialise_expand",
    "IGNORED",
    "MATERIALISED",
    "MaskedScores",
    "MaxWithIndices",
    "Parameter",
    "Partial",
    "Value",
    "swaps",
]
