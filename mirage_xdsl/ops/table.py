"""The op table: every operation of the kernel, block and thread dialects, once.

Each entry is an :class:`~mirage_xdsl.ops.spec.OpSpec`. To add an element-wise
op, add its entry here (and, if its GPU code calls a scalar function the
backends do not know yet, a :class:`~mirage_xdsl.ops.spec.MathFn` in
:data:`MATH`): the dialects, the interpreter, the verifier, the search, both
code generators, the torch front end and the fuzzer all read it. The order of
the entries is the order the dialects and menus list them in (the fuzzer
draws by position, so a new entry goes after the last of its form).
"""

from __future__ import annotations

import math

import numpy as np

from mirage_xdsl.ops.spec import KEYED, Form, MathFn, OpSpec, increasing

GELU_TANH_SCALE = math.sqrt(2.0 / math.pi)
"""sqrt(2/pi), the scale inside the tanh approximation of GELU."""
GELU_TANH_CUBIC = 0.044715
"""The cubic coefficient of the tanh approximation of GELU."""
SQRT_HALF = 0.7071067811865476
"""1 / sqrt(2), the argument scale of the exact GELU's erf."""

_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x: np.ndarray) -> np.ndarray:
    """The error function element-wise, in ``x``'s float type.

    numpy has no erf and scipy is not a dependency; ``math.erf`` is exact to
    double precision, which the fp32 reference rounds.
    """
    x = np.asarray(x)
    return _erf(x).astype(x.dtype if x.dtype.kind == "f" else np.float64)


def quotient(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x / y``, and 0 wherever ``x`` is 0, whatever ``y`` is.

    The finite field's quotient is ``x`` times the inverse of ``y`` (0 for 0),
    so there too 0 / 0 is 0; a masked softmax (``exp(s - m) M / sum(exp(s -
    m) M)``) so gives 0 for a row with every key masked, as torch's SDPA
    does, instead of NaN, which would reach every later position through the
    keys and values the mask multiplies by 0 (NaN times 0 is NaN)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.divide(x, y)
    return np.where(x == 0, np.zeros_like(q), q)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return 0.5 * x * (1 + np.tanh(GELU_TANH_SCALE * (x + GELU_TANH_CUBIC * x * x * x)))


def gelu_erf(x: np.ndarray) -> np.ndarray:
    """Exact GELU: 0.5 x (1 + erf(x / sqrt 2))."""
    return 0.5 * x * (1 + erf(x / np.sqrt(x.dtype.type(2.0))))


def _zero(x: np.ndarray) -> np.ndarray:
    return x.dtype.type(0) if isinstance(x, np.ndarray) else 0.0


MATH: dict[str, MathFn] = {
    f.name: f
    for f in (
        MathFn("exp", "ExpOp", "expf", np.exp),
        MathFn("sqrt", "SqrtOp", "sqrtf", np.sqrt),
        MathFn("tanh", "TanhOp", "tanhf", np.tanh),
        MathFn("erf", "ErfOp", "erff", erf),
        MathFn("log", "LogOp", "logf", np.log),
    )
}
"""Scalar functions the GPU code of an op may call (``arith.math(name, x)``)."""


def _half_x_times_one_plus(a, x, y):
    """0.5 x (1 + y), the shape both GELUs share (the CUDA C forms)."""
    return a.mul(a.mul(a.const(0.5, x), x), a.add(a.const(1.0, x), y))


def _gelu_tanh_cuda(a, x):
    cubic = a.mul(a.const(GELU_TANH_CUBIC, x), a.mul(x, a.mul(x, x)))
    inner = a.mul(a.const(GELU_TANH_SCALE, x), a.add(x, cubic))
    return _half_x_times_one_plus(a, x, a.math("tanh", inner))


def _silu_cuda(a, x):
    one = a.const(1.0, x)
    return a.div(x, a.add(one, a.exp(a.neg(x))))


def _sigmoid_cuda(a, x):
    one = a.const(1.0, x)
    return a.div(one, a.add(one, a.exp(a.neg(x))))


def _silu_field(a, x):
    one = a.const(1, x)
    return a.div(x, a.add(a.exp(a.neg(x)), one))


def _sigmoid_field(a, x):
    """``1 / (1 + exp(-x))`` with the exp model, so ``x * sigmoid(x)`` is
    exactly SiLU's image."""
    one = a.const(1, x)
    return a.div(one, a.add(a.exp(a.neg(x)), one))


def _tanh_triton(x: str) -> str:
    # tanh(y) = 2 sigmoid(2y) - 1: tl.sigmoid exists in every Triton release
    # we support, a tanh does not (tl.math.tanh is missing from 3.9).
    return f"(2.0 * tl.sigmoid(2.0 * {x}) - 1.0)"


def _real_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _real_silu(x):
    return x / (1 + np.exp(-x))


def _real_relu(x):
    return np.maximum(x, _zero(x))


def _real_softplus(x):
    return np.logaddexp(x, _zero(x))


def _softplus_field(a, x):
    """``log(1 + exp(x))`` with the exp model and the log's keyed function:
    exactly the image of the ops written out."""
    return a.keyed("log", a.add(a.exp(x), a.const(1, x)))


def _softplus_cuda(a, x):
    """``max(x, 0) + log(1 + exp(-|x|))``: no overflow for large ``x``."""
    zero, one = a.const(0.0, x), a.const(1.0, x)
    magnitude = a.max(x, a.neg(x))
    return a.add(a.max(x, zero), a.math("log", a.add(one, a.exp(a.neg(magnitude)))))


OPS_IN_ORDER: tuple[OpSpec, ...] = (
    # --- element-wise, two operands ------------------------------------------
    OpSpec(
        "add",
        Form.BINARY,
        "Element-wise sum with broadcasting.",
        real=lambda x, y: x + y,
        field=lambda a, x, y: a.add(x, y),
        linear=True,
        zero_preserving=True,
        triton="{x} + {y}",
        cuda=lambda a, x, y: a.add(x, y),
        interval=lambda alo, ahi, blo, bhi: (alo + blo, ahi + bhi),
    ),
    OpSpec(
        "mul",
        Form.BINARY,
        "Element-wise product with broadcasting.",
        real=lambda x, y: x * y,
        field=lambda a, x, y: a.mul(x, y),
        linear=True,
        zero_preserving=True,
        triton="{x} * {y}",
        cuda=lambda a, x, y: a.mul(x, y),
        interval=lambda alo, ahi, blo, bhi: (alo * blo, ahi * bhi),
    ),
    OpSpec(
        "div",
        Form.BINARY,
        "Element-wise quotient with broadcasting; 0 / y is 0 for every y, 0 "
        "too (a softmax row whose every key is masked is 0, as torch's SDPA "
        "gives it, not 0 / 0).",
        real=lambda x, y: quotient(x, y),
        field=lambda a, x, y: a.div(x, y),
        linear=True,
        triton="tl.where({x} == 0, 0.0, {x} / {y})",
        cuda=lambda a, x, y: a.div(x, y),
        interval=lambda alo, ahi, blo, bhi: (alo / bhi, ahi / blo),
    ),
    # --- element-wise, one operand -------------------------------------------
    OpSpec(
        "exp",
        Form.UNARY,
        "Element-wise e^x.",
        flops=4,
        real=np.exp,
        field=lambda a, x: a.exp(x),
        triton="tl.exp({x})",
        cuda=lambda a, x: a.exp(x),
        torch=("exp",),
        interval=increasing(np.exp),
    ),
    OpSpec(
        "silu",
        Form.UNARY,
        "Element-wise x * sigmoid(x).",
        flops=6,
        real=_real_silu,
        field=_silu_field,
        zero_preserving=True,
        triton="{x} * tl.sigmoid({x})",
        cuda=_silu_cuda,
        torch=("silu",),
        interval=increasing(_real_silu),
    ),
    OpSpec(
        "sqrt",
        Form.UNARY,
        "Element-wise square root.",
        flops=4,
        real=np.sqrt,
        field=KEYED,
        zero_preserving=True,
        triton="tl.sqrt({x})",
        cuda=lambda a, x: a.math("sqrt", x),
        interval=increasing(np.sqrt),
    ),
    OpSpec(
        "square",
        Form.UNARY,
        "Element-wise x * x.",
        real=lambda x: x * x,
        field=lambda a, x: a.mul(x, x),
        expr=lambda e, x: e.mul(x, x),
        zero_preserving=True,
        triton="{x} * {x}",
        cuda=lambda a, x: a.mul(x, x),
        interval=increasing(lambda x: x * x),
    ),
    # --- element-wise with a constant ----------------------------------------
    OpSpec(
        "mul_scalar",
        Form.SCALAR,
        "Element-wise product with a constant: x * c.",
        real=lambda x, c: x * c,
        field=lambda a, x, c: a.mul(x, a.const(c, x)),
        expr=lambda e, x, c: e.mul(x, e.const(c)),
        linear=True,
        zero_preserving=True,
        triton="{x} * {c}",
        cuda=lambda a, x, c: a.mul(x, a.const(c, x)),
        interval=increasing(lambda x, c: x * c),
        constants=(0.125, 0.5, 2.0, 3.0, 0.1),
    ),
    OpSpec(
        "add_scalar",
        Form.SCALAR,
        "Element-wise sum with a constant: x + c.",
        real=lambda x, c: x + c,
        field=lambda a, x, c: a.add(x, a.const(c, x)),
        expr=lambda e, x, c: e.add(x, e.const(c)),
        triton="{x} + {c}",
        cuda=lambda a, x, c: a.add(x, a.const(c, x)),
        interval=increasing(lambda x, c: x + c),
        constants=(0.25, 1.0, 0.1),
    ),
    OpSpec(
        "clamp_min",
        Form.SCALAR,
        "Element-wise lower bound: max(x, c) (torch.clamp's min).",
        real=lambda x, c: np.maximum(x, c),
        field=KEYED,
        triton="tl.maximum({x}, {c})",
        cuda=lambda a, x, c: a.max(x, a.const(c, x)),
        interval=increasing(lambda x, c: np.maximum(x, c)),
        constants=(0.5, 2.0),
    ),
    OpSpec(
        "clamp_max",
        Form.SCALAR,
        "Element-wise upper bound: min(x, c) (torch.clamp's max).",
        real=lambda x, c: np.minimum(x, c),
        field=KEYED,
        triton="tl.minimum({x}, {c})",
        cuda=lambda a, x, c: a.neg(a.max(a.neg(x), a.const(-c, x))),
        interval=increasing(lambda x, c: np.minimum(x, c)),
        constants=(0.5, 2.0),
    ),
    OpSpec(
        "neg",
        Form.UNARY,
        "Element-wise negation, -x.",
        real=lambda x: -x,
        field=lambda a, x: a.neg(x),
        linear=True,
        zero_preserving=True,
        triton="-{x}",
        cuda=lambda a, x: a.neg(x),
        torch=("neg",),
    ),
    OpSpec(
        "relu",
        Form.UNARY,
        "Element-wise max(x, 0).",
        real=_real_relu,
        field=KEYED,
        zero_preserving=True,
        triton="tl.maximum({x}, 0.0)",
        cuda=lambda a, x: a.max(x, a.const(0.0, x)),
        torch=("relu",),
        interval=increasing(_real_relu),
    ),
    OpSpec(
        "sigmoid",
        Form.UNARY,
        "Element-wise logistic function 1 / (1 + e^-x).",
        flops=6,
        real=_real_sigmoid,
        field=_sigmoid_field,
        triton="tl.sigmoid({x})",
        cuda=_sigmoid_cuda,
        interval=increasing(_real_sigmoid),
    ),
    OpSpec(
        "tanh",
        Form.UNARY,
        "Element-wise hyperbolic tangent.",
        flops=8,
        real=np.tanh,
        field=KEYED,
        zero_preserving=True,
        triton=_tanh_triton("{x}"),
        cuda=lambda a, x: a.math("tanh", x),
        torch=("tanh",),
        interval=increasing(np.tanh),
    ),
    OpSpec(
        "gelu",
        Form.UNARY,
        "Element-wise GELU, tanh approximation: "
        "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).",
        flops=12,
        real=gelu_tanh,
        field=KEYED,
        zero_preserving=True,
        triton=(
            f"(0.5 * {{x}} * (1.0 + (2.0 * tl.sigmoid(2.0 * {GELU_TANH_SCALE!r}"
            f" * ({{x}} + {GELU_TANH_CUBIC!r} * {{x}} * {{x}} * {{x}})) - 1.0)))"
        ),
        cuda=_gelu_tanh_cuda,
        interval=increasing(gelu_tanh),
    ),
    OpSpec(
        "gelu_erf",
        Form.UNARY,
        "Element-wise exact GELU: 0.5 x (1 + erf(x / sqrt(2))).",
        flops=12,
        real=gelu_erf,
        field=KEYED,
        zero_preserving=True,
        triton=f"(0.5 * {{x}} * (1.0 + tl.math.erf({{x}} * {SQRT_HALF!r})))",
        cuda=lambda a, x: _half_x_times_one_plus(
            a, x, a.math("erf", a.mul(x, a.const(SQRT_HALF, x)))
        ),
        interval=increasing(gelu_erf),
    ),
    OpSpec(
        "log",
        Form.UNARY,
        "Element-wise natural logarithm.",
        flops=4,
        real=np.log,
        field=KEYED,
        triton="tl.log({x})",
        cuda=lambda a, x: a.math("log", x),
        torch=("log",),
        interval=increasing(np.log),
    ),
    OpSpec(
        "softplus",
        Form.UNARY,
        "Element-wise log(1 + e^x) (torch's softplus with beta 1).",
        flops=10,
        real=_real_softplus,
        field=_softplus_field,
        triton="(tl.maximum({x}, 0.0) + tl.log(1.0 + tl.exp(-tl.abs({x}))))",
        cuda=_softplus_cuda,
        interval=increasing(_real_softplus),
    ),
    # --- structure: semantics live with the partition walker -----------------
    OpSpec(
        "rms_norm",
        Form.NORM,
        "RMSNorm over the last dim with unit weight: x / sqrt(mean(x^2) + eps).",
        flops=8,
    ),
    OpSpec("matmul", Form.MATMUL, "Matmul over the last two dims, batched."),
    OpSpec("reduce_sum", Form.REDUCTION, "Sum over one dim, kept with size 1."),
    OpSpec("reduce_max", Form.REDUCTION, "Maximum over one dim, kept with size 1."),
    OpSpec(
        "concat",
        Form.CONCAT,
        "Concatenation of two tensors along one dim.",
        levels=("kernel", "block"),
    ),
    OpSpec(
        "broadcast",
        Form.BROADCAST,
        "A tensor stretched along its size-1 dims (torch expand): a layout change.",
        levels=("kernel",),
    ),
    OpSpec(
        "cast",
        Form.CAST,
        "The same values in another float element type (f16, bf16, f32).",
        levels=("kernel",),
    ),
    OpSpec(
        "slice",
        Form.SLICE,
        "The elements start to end (exclusive) of one dim: a layout change.",
        levels=("kernel",),
    ),
    OpSpec(
        "transpose",
        Form.TRANSPOSE,
        "Swap of two dims: a layout change, not arithmetic.",
        levels=("kernel", "block"),
    ),
    OpSpec(
        "reshape",
        Form.RESHAPE,
        "Row-major reshape: the same elements in the same order, another shape.",
        levels=("kernel",),
    ),
    OpSpec(
        "forloop_accum",
        Form.ACCUM,
        "Accumulation of a tile over the block's for-loop iterations.",
        levels=("block",),
    ),
)
