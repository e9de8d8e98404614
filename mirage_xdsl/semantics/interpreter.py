"""The µGraph interpreter: every level, with the GPU's partition semantics.

Kernel-level ops compute on whole device tensors. A ``kernel.customized`` op
runs its block graph as the GPU would, but vectorised: every block-level value
is held as one array of shape ``(grid_x, grid_y, grid_z, iterations, *tile)``.
The leading axes index the thread block, the fourth the for-loop iteration
(size 1 for values that do not vary with it), and the rest is the tile one
block sees. ``block.input`` cuts a device tensor into exactly these tiles,
``block.forloop_accum`` sums over the iteration axis (weighting each
iteration by ``exp(shift_t - max shift)`` when it has a shift), and ``block.output``
stitches tiles back by ``omap``. Tile-level ops use negative axes, so the same
implementation serves kernel, block and thread levels.

All arithmetic goes through a :class:`~mirage_xdsl.semantics.domain.Domain`, so the float
reference and the finite-field fingerprints share this one walker; an
element-wise op is handed to the domain with its op-table entry
(``mirage_xdsl.ops``), so the walker knows no element-wise kind by name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.ir import Operation

from mirage_xdsl.dialects import block, kernel, thread
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.diagnostics import MirageError, where
from mirage_xdsl.ops import OPS
from mirage_xdsl.semantics.domain import Domain, FloatDomain

Collective = Callable[[Any], Any]
"""A sum over shards: this shard's value of a tensor in, the sum out."""

BLOCK_AXES = 4
"""Leading axes of a block-level value: grid x, y, z and the for-loop iteration."""
ITERATION_AXIS = 3


def rms(
    domain: Domain,
    x: np.ndarray,
    axes: tuple[int, ...],
    count: int,
    eps: float = 0.0,
) -> np.ndarray:
    """sqrt(mean(x^2) + eps) over ``axes``, which hold ``count`` elements in all."""
    mean = domain.div_count(domain.sum(domain.mul(x, x), axes), count)
    return domain.sqrt(domain.add(mean, domain.const(eps, mean)) if eps else mean)


def tensor_op(domain: Domain, op: t.TensorOp, args: Sequence[np.ndarray]) -> np.ndarray:
    """Evaluate one arithmetic op of any level on (possibly block-batched) arrays.

    A domain that computes only what is read (``begin_op``) is told which op
    this is, and that it is done, around the evaluation.
    """
    begin = getattr(domain, "begin_op", None)
    if begin is None:
        return _tensor_op(domain, op, args)
    begin(op)
    try:
        return _tensor_op(domain, op, args)
    finally:
        begin(None)


def _tensor_op(
    domain: Domain, op: t.TensorOp, args: Sequence[np.ndarray]
) -> np.ndarray:
    kind = op.KIND
    spec = OPS[kind]
    if spec.elementwise:
        return domain.elementwise(spec, *args, *op.constant_args())
    if kind == "matmul":
        return domain.matmul(args[0], args[1])
    if kind == "rms_norm":
        x = args[0]
        eps = op.eps_value  # type: ignore[attr-defined]
        return domain.div(x, rms(domain, x, (-1,), x.shape[-1], eps))
    rank = len(op.results[0].type.get_shape())  # type: ignore[attr-defined]
    if kind == "concat":
        dim = op.dim.value.data - rank  # type: ignore[attr-defined]
        return np.concatenate(_broadcast_except(args[0], args[1], dim), axis=dim)
    if kind in t.LAYOUT_KINDS:
        return layout(op, args[0])
    dim = op.dim.value.data - rank  # type: ignore[attr-defined]
    if kind == "reduce_sum":
        return domain.sum(args[0], (dim,))
    if kind == "reduce_max":
        return domain.reduce_max(args[0], dim)
    raise NotImplementedError(f"no semantics for '{op.name}'")


def layout(op: t.TensorOp, x: Any) -> Any:
    """A layout op (transpose, reshape, slice, broadcast, cast), on arrays and
    residues alike.

    A transpose swaps its dims counted from the back, so a block-batched tile
    (leading grid and iteration axes) swaps the same two; a reshape and a
    slice exist at the kernel level only, where values are whole tensors.
    """
    shape = tuple(op.results[0].type.get_shape())  # type: ignore[attr-defined]
    if op.KIND == "reshape":
        return x.reshape(shape)
    if op.KIND == "slice":
        return window(x, *op.window)  # type: ignore[attr-defined]
    if op.KIND == "cast":  # values are fp32 (or field elements) at every type
        return x
    if op.KIND == "broadcast":
        return np.broadcast_to(x, shape)
    a, b = (d - len(shape) for d in op.dims)  # type: ignore[attr-defined]
    return x.swapaxes(a, b)


def window(x: Any, dim: int, start: int, end: int) -> Any:
    """Elements ``[start, end)`` of ``x`` along ``dim`` (counted from the
    front of a whole tensor), on an array or on fingerprint residues alike."""
    return x[(slice(None),) * dim + (slice(start, end),)]


def read_input(op: block.InputOp, x: Any) -> Any:
    """The device tensor as ``op``'s maps index it: transposed, its window,
    then lifted."""
    if op.swapped_dims is not None:
        x = x.swapaxes(*op.swapped_dims)
    if op.window_of is not None:
        x = window(x, *op.window_of)
    return x.reshape(op.viewed_shape)


def _broadcast_except(
    lhs: np.ndarray, rhs: np.ndarray, axis: int
) -> tuple[np.ndarray, np.ndarray]:
    """Broadcast two arrays to agree on every axis but ``axis``."""
    ls, rs = list(lhs.shape), list(rhs.shape)
    ls[axis] = rs[axis] = 1
    common = list(np.broadcast_shapes(tuple(ls), tuple(rs)))
    lshape, rshape = list(common), list(common)
    lshape[axis], rshape[axis] = lhs.shape[axis], rhs.shape[axis]
    return np.broadcast_to(lhs, lshape), np.broadcast_to(rhs, rshape)


def split_tiles(
    x: np.ndarray, imap: Sequence[int], fmap: int, grid: Sequence[int], forloop: int
) -> np.ndarray:
    """Cut a device tensor into per-block, per-iteration tiles.

    Returns ``(gx, gy, gz, iterations, *tile)``; axes a tensor is replicated
    along have size 1 and broadcast.
    """
    factors: list[int] = []
    grid_axis: dict[int, int] = {}
    loop_axis = None
    tile_axes: list[int] = []
    for d, size in enumerate(x.shape):
        for g, mapped in enumerate(imap):
            if mapped == d:
                grid_axis[g] = len(factors)
                factors.append(grid[g])
                size //= grid[g]
        if fmap == d:
            loop_axis = len(factors)
            factors.append(forloop)
            size //= forloop
        tile_axes.append(len(factors))
        factors.append(size)
    y = x.reshape(factors)
    lead = [grid_axis[g] for g in range(3) if g in grid_axis]
    lead += [loop_axis] if loop_axis is not None else []
    y = y.transpose(lead + tile_axes)
    shape = [grid[g] if g in grid_axis else 1 for g in range(3)]
    shape.append(forloop if loop_axis is not None else 1)
    return y.reshape(shape + list(y.shape[len(lead) :]))


def stitch_tiles(y: np.ndarray, omap: Sequence[int], grid: Sequence[int]) -> np.ndarray:
    """Inverse of :func:`split_tiles` for outputs: place each block's tile."""
    tile = y.shape[BLOCK_AXES:]
    y = np.broadcast_to(y, (*grid, 1, *tile))[:, :, :, 0]
    order: list[int] = []
    full: list[int] = []
    for d, size in enumerate(tile):
        extent = size
        for g, mapped in enumerate(omap):
            if mapped == d:
                order.append(g)
                extent *= grid[g]
        order.append(3 + d)
        full.append(extent)
    order += [g for g in range(3) if g not in order]
    return y.transpose(order).reshape(full)


def _last_uses(ops: Sequence[Operation]) -> list[list[Any]]:
    """For each op of a block graph, the values it is the last reader of."""
    last: dict[Any, int] = {}
    for i, op in enumerate(ops):
        for value in op.operands:
            last[value] = i
        for value in op.results:
            last.setdefault(value, i)
    dead: list[list[Any]] = [[] for _ in ops]
    for value, i in last.items():
        dead[i].append(value)
    return dead


def _accumulated_matmul(
    op: Operation, args: Sequence[np.ndarray]
) -> block.ForloopAccumOp | None:
    """The plain for-loop accumulation that alone reads this block matmul, when
    an operand varies with the iteration (then the two fold into one matmul)."""
    uses = list(op.results[0].uses) if isinstance(op, block.MatmulOp) else []
    if len(uses) != 1:
        return None
    user = uses[0].operation
    if not isinstance(user, block.ForloopAccumOp) or user.reduction != "none":
        return None
    if user.shifted:  # each product is weighted first
        return None
    varies = any(a.shape[ITERATION_AXIS] > 1 for a in args)
    return user if varies and args[0].ndim == args[1].ndim else None


def accumulate_matmul(domain: Domain, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``sum_t x_t @ y_t`` over the iteration axis, as one matmul.

    Summing per-iteration products is a matmul over the concatenated
    contraction: ``sum_t x_t @ y_t = [x_0 .. x_T] @ [y_0; ..; y_T]``, and a
    loop-invariant operand factors out: ``sum_t x_t @ y = (sum_t x_t) @ y``.
    Both are exact identities of any ring, so every domain gives the value the
    per-iteration evaluation would. The result keeps a size-1 iteration axis.
    """
    if x.shape[ITERATION_AXIS] == 1 or y.shape[ITERATION_AXIS] == 1:
        x = x if x.shape[ITERATION_AXIS] == 1 else domain.sum(x, (ITERATION_AXIS,))
        y = y if y.shape[ITERATION_AXIS] == 1 else domain.sum(y, (ITERATION_AXIS,))
        return domain.matmul(x, y)
    # (..., T, *batch, M, K) -> (..., *batch, M, T * K), and alike for y.
    n = x.ndim
    steps = x.shape[ITERATION_AXIS]
    lead = [a for a in range(n) if a != ITERATION_AXIS]
    xs = x.transpose(lead[:-1] + [ITERATION_AXIS, n - 1])
    xs = xs.reshape(*xs.shape[:-2], steps * x.shape[-1])
    ys = y.transpose(lead[:-2] + [ITERATION_AXIS, n - 2, n - 1])
    ys = ys.reshape(*ys.shape[:-3], steps * y.shape[-2], y.shape[-1])
    product = domain.matmul(xs, ys)
    return product.reshape(
        *product.shape[:ITERATION_AXIS], 1, *product.shape[ITERATION_AXIS:]
    )


def shift_weights(domain: Domain, shift: np.ndarray) -> np.ndarray:
    """``exp(shift_t - M)`` per iteration ``t``, ``M`` the maximum over all
    iterations: the factor that brings iteration ``t``'s terms, computed
    against their own shift, to the common one (the online softmax).

    ``M`` is the domain's ``reduce_max`` along the iteration axis, so in the
    finite field it is a keyed random function of the shifts, and the weights
    are exact powers of the exp generator whatever it is
    (``docs/verifier.md``). A shift read once for the whole loop (one
    iteration along the axis) is its own maximum, so every weight is
    ``exp(0) = 1`` in any domain: no row function is drawn for it.
    """
    top = (
        shift
        if shift.shape[ITERATION_AXIS] == 1
        else domain.reduce_max(shift, ITERATION_AXIS - shift.ndim)
    )
    return domain.exp(domain.add(shift, domain.neg(top)))


def _tensor_impl(op_type: type[Operation]) -> Callable[..., Any]:
    def run(self: MirageFunctions, interpreter: Interpreter, op: Any, args: Any):
        return (tensor_op(self.domain, op, args),)

    return impl(op_type)(run)


ARITH_OPS: tuple[type[Operation], ...] = tuple(
    cls
    for dialect in (kernel.Kernel, block.BlockDialect, thread.Thread)
    for cls in dialect.operations
    if issubclass(cls, t.TensorOp)
)


class MirageFunctions(InterpreterFunctions):
    """Implementations of the kernel, block and thread ops over a domain.

    ``collective`` sums a value over the shards of a tensor-parallel program
    (``kernel.all_reduce``): this shard's value in, the sum out. A program
    run without one has no shards to sum over.
    """

    def __init__(self, domain: Domain, collective: Collective | None = None):
        self.domain = domain
        self.collective = collective

    @impl(kernel.AllReduceOp)
    def run_all_reduce(
        self, interpreter: Interpreter, op: kernel.AllReduceOp, args: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        if self.collective is None:
            raise MirageError(
                f"{where(op)}: error: '{op.name}' sums over {op.group_size} "
                "shards; a shard's program runs with its shards "
                "(semantics.sharding.run_sharded, or runtime.distributed)"
            )
        return (self.collective(args[0]),)

    @impl(kernel.CustomizedOp)
    def run_customized(
        self, interpreter: Interpreter, op: kernel.CustomizedOp, args: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        grid, forloop = op.grid_dims, op.forloop
        env: dict[Any, np.ndarray] = dict(zip(op.entry.args, args, strict=True))
        outputs: list[np.ndarray] = []
        fused: dict[Operation, np.ndarray] = {}
        ops = list(op.entry.ops)
        for inner, dead in zip(ops, _last_uses(ops), strict=True):
            ins = [] if inner in fused else [env[v] for v in inner.operands]
            if inner in fused:
                env[inner.results[0]] = fused.pop(inner)
            elif isinstance(inner, block.InputOp):
                value = split_tiles(
                    read_input(inner, ins[0]),
                    inner.input_map,
                    inner.forloop_dim,
                    grid,
                    forloop,
                )
                env[inner.result] = value
            elif isinstance(inner, block.OutputOp):
                outputs.append(stitch_tiles(ins[0], inner.output_map, grid))
            elif (accum := _accumulated_matmul(inner, ins)) is not None:
                fused[accum] = accumulate_matmul(self.domain, ins[0], ins[1])
            else:
                results = interpreter.run_op(inner, tuple(ins))
                env.update(zip(inner.results, results, strict=True))
            for value in dead:  # drop tiles nothing reads again
                env.pop(value, None)
        return tuple(outputs)

    @impl(block.ForloopAccumOp)
    def run_forloop_accum(
        self, interpreter: Interpreter, op: block.ForloopAccumOp, args: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        x = args[0]
        forloop = op.parent_op().forloop  # type: ignore[union-attr]
        d = self.domain
        if op.shifted:
            x = d.mul(shift_weights(d, args[1]), x)
        iterations = forloop if x.shape[ITERATION_AXIS] == 1 else 1
        count = x.shape[-1] * x.shape[ITERATION_AXIS]
        match op.reduction:
            case "none":
                acc = d.sum(x, (ITERATION_AXIS,))
            case "sum":
                acc = d.sum(x, (ITERATION_AXIS, -1))
            case "mean":
                acc = d.div_count(d.sum(x, (ITERATION_AXIS, -1)), count)
                iterations = 1
            case _:
                acc = rms(d, x, (ITERATION_AXIS, -1), count)
                iterations = 1
        if iterations > 1:
            # A loop-invariant tile is added once per iteration.
            acc = d.mul(acc, d.load(np.full((1,) * acc.ndim, iterations)))
        return (acc,)

    @impl(block.ThreadGraphOp)
    def run_thread_graph(
        self, interpreter: Interpreter, op: block.ThreadGraphOp, args: tuple[Any, ...]
    ) -> tuple[Any, ...]:
        return interpreter.run_ssacfg_region(op.body, args, "thread_graph")

    @impl_terminator(thread.YieldOp)
    def run_yield(
        self, interpreter: Interpreter, op: thread.YieldOp, args: tuple[Any, ...]
    ) -> tuple[TerminatorValue, tuple[Any, ...]]:
        return ReturnedValues(args), ()


for _op in ARITH_OPS:
    setattr(MirageFunctions, f"run_{_op.name.replace('.', '_')}", _tensor_impl(_op))
MirageFunctions = register_impls(MirageFunctions)


def entry_function(module: ModuleOp, name: str | None = None) -> func.FuncOp:
    """The function to run: ``name``, or the module's only/first function."""
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if name is not None:
        funcs = [f for f in funcs if f.sym_name.data == name]
    if not funcs:
        raise ValueError(
            f"no function {name or ''} to run in the module".replace("  ", " ")
        )
    return funcs[0]


def run(
    module: ModuleOp,
    inputs: Sequence[np.ndarray],
    domain: Domain | None = None,
    function: str | None = None,
    collective: Collective | None = None,
) -> list[np.ndarray]:
    """Run a function of ``module`` on ``inputs`` and return its outputs;
    ``collective`` is the sum over shards of a shard's program."""
    domain = domain or FloatDomain()
    fn = entry_function(module, function)
    interpreter = Interpreter(module)
    # Imported here: importing any of xDSL's interpreters imports them all
    # (RISC-V's among them), a sixth of a second that every tool would
    # otherwise pay at startup whether it interprets anything or not.
    from xdsl.interpreters.func import FuncFunctions

    interpreter.register_implementations(FuncFunctions())
    interpreter.register_implementations(MirageFunctions(domain, collective))
    values = tuple(domain.load(x) for x in inputs)
    return list(interpreter.call_op(fn, values))
