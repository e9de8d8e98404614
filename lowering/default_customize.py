"""``default-customize``: give every bare kernel op a block-level definition.

The lowering to GPU code only understands ``kernel.customized`` ops, whose
block graphs say exactly how the work is partitioned. This pass turns each
library-style kernel op (``kernel.matmul``, ``kernel.exp``,
``kernel.reduce_sum``, ``kernel.rms_norm``, ...) into a one-op customized
kernel with a sensible default partition, the schedule a hand-written library
kernel would use:

- element-wise ops: the grid tiles the output; broadcast operands are
  replicated along the grid dims they lack;
- ``reduce_sum``: the grid tiles the kept dims, and the for-loop walks the
  reduced dim, accumulating in fp32;
- ``reduce_max``: the grid tiles the kept dims; each block reads whole rows
  (a maximum is not accumulated across for-loop iterations);
- ``rms_norm``: the grid tiles the rows; each block normalises whole rows;
- ``matmul``: the grid tiles the output (batch, rows, columns) and the
  for-loop walks the contraction dim, accumulating in fp32; a matmul of at
  most 16 rows (a decode projection) reads 64-column weight strips, split
  over K too where that fills the GPU, with the element-wise ops that only
  continue it fused into its last kernel, and an RMSNorm that makes its rows
  (``rms_norm(a) * w``) into its kernels (``split_k.py``);
- ``transpose``: the grid tiles the two swapped dims (and one more), and
  each block swaps its tile in shared memory.

``kernel.reshape`` is left as it is: it is no kernel, and the lowering gives
its result its operand's buffer.

The partitions are chosen from the shapes alone, so the pass needs no search.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.gpu_target import H100, Target, current
from mirage_xdsl.ir.builder import BlockGraph, lift, new_threadblock_graph
from mirage_xdsl.ir.diagnostics import OpVerifyError
from mirage_xdsl.lowering.aliases import is_alias
from mirage_xdsl.lowering.norm_prologue import prologue_of
from mirage_xdsl.lowering.split_k import (
    blocks_to_aim_for,
    epilogue_of,
    k_major,
    plan_split_k,
    sibling_of,
    skinny_rows,
    split_k_ops,
)
from mirage_xdsl.ops import elementwise_kinds

THREADS = (128, 1, 1)
"""Threads per block of every default kernel: four warps."""


TARGET_BLOCKS = blocks_to_aim_for(H100)
"""How many blocks a default grid aims for on the H100."""
MAX_TILE = 4096
"""Largest tile (elements) a default block handles per for-loop iteration."""
MIN_TILE = 256
K_TILE = 64
"""Contraction-dim chunk of a default matmul iteration."""
WIDE_K_TILE = 128
"""The chunk of a matmul of whole 64-row tiles whose grid fills the GPU at
most once: each block then has more in flight per iteration (measured on the
H100 by ``tools/bench_matmul_tiles.py``: 256 x 2048 x 5632 takes 22.7 µs
instead of 31.2, 256 x 512 x 2048 7.6 instead of 10.0). With more blocks the
wider chunk's shared memory costs occupancy instead."""
MMA_MIN_COLS = 64
"""Narrowest column tile of a matmul of whole 64-row tiles (tensor cores)."""
SWAP_TILE = 64
"""Largest extent of each swapped dim in a default transpose tile."""
MIN_SWAP_TILE = 8
"""Smallest extent a swapped dim's tile shrinks to, to fit the tile."""


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def prod(xs: Sequence[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def split_dims(
    shape: Sequence[int], order: Sequence[int], target: int, keep: dict[int, int]
) -> dict[int, int]:
    """Grid factors for the dims in ``order`` so a tile has about ``target`` elements.

    Dims are split in ``order`` (at most three, the grid's rank) until the
    tile is small enough; ``keep[d]`` is the smallest extent dim ``d`` may be
    cut down to (the last dim stays wide for vectorised access).
    """
    tile = list(shape)
    factors: dict[int, int] = {}
    for d in order:
        if len(factors) == 3 or prod(tile) <= target:
            break
        floor = min(keep.get(d, 1), shape[d])
        options = [f for f in divisors(shape[d]) if f > 1 and shape[d] // f >= floor]
        if not options:
            continue
        rest = prod(tile) // tile[d]
        fits = [f for f in options if rest * (shape[d] // f) <= target]
        f = fits[0] if fits else options[-1]
        factors[d] = f
        tile[d] //= f
    return factors


def grid_of(
    factors: dict[int, int], order: Sequence[int]
) -> tuple[list[int], list[int]]:
    """Assign split dims to grid x, y, z in ``order``: returns (grid, dim of each)."""
    dims = [d for d in order if d in factors][:3]
    grid = [factors[d] for d in dims] + [1] * (3 - len(dims))
    return grid, dims + [-1] * (3 - len(dims))


def imap_for(grid_dims: Sequence[int], operand: Sequence[int], out: Sequence[int]):
    """An operand's imap: follow the output's split unless the operand broadcasts."""
    return [d if d != -1 and operand[d] == out[d] else -1 for d in grid_dims]


def tile_target(total: int) -> int:
    return max(MIN_TILE, min(MAX_TILE, total // TARGET_BLOCKS))


def elementwise(op: t.TensorOp) -> BlockGraph:
    out = t.tensor_shape(op.results[0])
    rank = len(out)
    order = [*range(rank - 2, -1, -1), rank - 1][::-1]  # last dim first: grid x
    factors = split_dims(out, list(range(rank)), tile_target(prod(out)), {rank - 1: 64})
    grid, dims = grid_of(factors, order)
    bg = new_threadblock_graph(grid, THREADS, 1)
    ins = [
        bg.new_input(v, imap_for(dims, lift(v, rank), out), -1, rank)
        for v in op.operands
    ]
    result = block.ELEMENTWISE_OPS[op.KIND](*ins, *op.constant_args())
    bg.block.add_op(result)
    bg.new_output(result.results[0], dims)
    return bg


def reduce_sum(op: kernel.ReduceSumOp) -> BlockGraph:
    """Tiles of the kept dims; each block reads its rows in chunks of up to
    :data:`MAX_TILE` elements in all, so a block of one or two rows (a few
    rows spread over the GPU) loads them whole, with every load in flight at
    once, instead of walking a loop of round trips."""
    x = t.tensor_shape(op.input)
    out = t.tensor_shape(op.result)
    r = op.dim.value.data
    rank = len(x)
    kept = [d for d in range(rank) if d != r]
    rows_target = max(1, prod(out) // TARGET_BLOCKS)
    factors = split_dims(out, kept[::-1], rows_target, {})
    grid, dims = grid_of(factors, kept[::-1])
    rows = prod(out) // prod(grid)
    chunk = max(1, min(x[r], MAX_TILE // rows))
    forloop = min(f for f in divisors(x[r]) if x[r] // f <= chunk)
    bg = new_threadblock_graph(grid, THREADS, forloop)
    tile = bg.new_input(op.input, imap_for(dims, x, out), r if forloop > 1 else -1)
    if r == rank - 1 and forloop > 1:
        total = bg.forloop_accum(tile, "sum")
    else:
        total = bg.reduction(tile, r)
        if forloop > 1:
            total = bg.forloop_accum(total)
    bg.new_output(total, dims)
    return bg


def reduce_max(op: kernel.ReduceMaxOp) -> BlockGraph:
    """Whole rows per block: a maximum cannot be accumulated over for-loop
    iterations (``forloop_accum`` sums), so the grid tiles the kept dims and
    each block reads its rows in one tile."""
    x = t.tensor_shape(op.input)
    out = t.tensor_shape(op.result)
    r = op.dim.value.data
    kept = [d for d in range(len(x)) if d != r]
    rows_target = max(1, min(MAX_TILE // x[r], prod(out) // TARGET_BLOCKS))
    factors = split_dims(out, kept[::-1], rows_target, {})
    grid, dims = grid_of(factors, kept[::-1])
    bg = new_threadblock_graph(grid, THREADS, 1)
    tile = bg.new_input(op.input, imap_for(dims, x, out), -1)
    bg.new_output(bg.reduce_max(tile, r), dims)
    return bg


def rms_norm(op: kernel.RmsNormOp) -> BlockGraph:
    x = t.tensor_shape(op.input)
    rank = len(x)
    lead = list(range(rank - 1))[::-1]
    rows_target = max(1, min(MAX_TILE // x[-1], prod(x[:-1]) // TARGET_BLOCKS))
    factors = split_dims(x[:-1], lead, rows_target, {})
    grid, dims = grid_of(factors, lead)
    bg = new_threadblock_graph(grid, THREADS, 1)
    tile = bg.new_input(op.input, dims, -1)
    bg.new_output(bg.rms_norm(tile, op.eps_value), dims)
    return bg


def matmul(op: kernel.MatmulOp) -> BlockGraph:
    """Tiles of the output, the for-loop walking the contraction dim."""
    a = t.tensor_shape(op.lhs)
    out = t.tensor_shape(op.result)
    rank = len(out)
    m, n, k = out[-2], out[-1], a[-1]
    batch = prod(out[:-2])
    m_tile = m if m <= 64 else max(d for d in divisors(m) if d <= 64)
    rows_of_mma = m_tile >= 64
    # Columns: the widest tile that still gives enough blocks (no narrower
    # than tensor cores like when the rows fill them).
    n_tile = n
    for cand in (128, 64, 32, 16):
        if rows_of_mma and cand < MMA_MIN_COLS:
            break
        if n % cand == 0 and n_tile > cand:
            n_tile = cand
            if batch * (n // cand) * max(1, m // 64) >= TARGET_BLOCKS // 2:
                break
    blocks = batch * (n // n_tile) * (m // m_tile)
    # The grid has three dims: split the output dims with the most blocks
    # (columns first on ties); the rest stay whole in the block's tile.
    candidates = [(rank - 1, n // n_tile), (rank - 2, m // m_tile)]
    candidates += [(d, out[d]) for d in range(rank - 2)]
    chosen = sorted((c for c in candidates if c[1] > 1), key=lambda c: -c[1])[:3]
    factors = dict(chosen)
    order = [d for d, _ in candidates if d in factors]
    grid, dims = grid_of(factors, order)
    wide = rows_of_mma and blocks <= TARGET_BLOCKS // 2
    k_tile = max(d for d in divisors(k) if d <= (WIDE_K_TILE if wide else K_TILE))
    forloop = k // k_tile
    bg = new_threadblock_graph(grid, THREADS, forloop)
    loop = forloop > 1
    la, lb = lift(op.lhs, rank), lift(op.rhs, rank)
    a_map = [d if d != rank - 1 and la[d] == out[d] else -1 for d in dims]
    b_map = [d if d != rank - 2 and lb[d] == out[d] else -1 for d in dims]
    ta = bg.new_input(op.lhs, a_map, rank - 1 if loop else -1, rank)
    tb = bg.new_input(op.rhs, b_map, rank - 2 if loop else -1, rank)
    product = bg.matmul(ta, tb)
    bg.new_output(bg.forloop_accum(product) if loop else product, dims)
    return bg


def transpose(op: kernel.TransposeOp) -> BlockGraph:
    """Tiles of the two swapped dims, swapped in shared memory.

    The swapped dims get tiles of up to :data:`SWAP_TILE` each, so reads and
    writes both run along whole tile rows; a third grid dim splits the
    largest other dim (a leading one before the last, contiguous, dim) as
    far as the tile needs to stay within :data:`MAX_TILE`, and if that is
    not enough the swapped tiles shrink, to :data:`MIN_SWAP_TILE` at least.
    Other dims are whole in the tile. The input is split along its own dims,
    the output along the swapped ones.
    """
    x = t.tensor_shape(op.input)
    a, b = op.dims
    rank = len(x)
    tile = list(x)
    for d in (a, b):
        tile[d] = max(e for e in divisors(x[d]) if e <= SWAP_TILE)
    rest = [d for d in range(rank) if d not in (a, b) and x[d] > 1]
    third = sorted(rest, key=lambda d: (d == rank - 1, -x[d]))[:1]
    for c in third:
        others = prod(tile) // tile[c]
        tile[c] = max(e for e in divisors(x[c]) if others * e <= MAX_TILE or e == 1)
    while prod(tile) > MAX_TILE and max(tile[a], tile[b]) > MIN_SWAP_TILE:
        d = a if tile[a] >= tile[b] else b
        tile[d] = max(e for e in divisors(x[d]) if e < tile[d])
    factors = {d: x[d] // tile[d] for d in (a, b, *third) if tile[d] < x[d]}
    grid, dims = grid_of(factors, [b, a, *third])
    swap = {a: b, b: a}
    bg = new_threadblock_graph(grid, THREADS, 1)
    swapped = bg.transpose(bg.new_input(op.input, dims, -1), a, b)
    bg.new_output(swapped, [swap.get(d, d) for d in dims])
    return bg


def copy(op: kernel.SliceOp | kernel.CastOp) -> BlockGraph:
    """A slice or a cast: a copy tiled like an element-wise op. A slice's
    ``block.input`` reads its window in place; a cast's ``block.output``
    stores the result's element type."""
    out = t.tensor_shape(op.result)
    rank = len(out)
    factors = split_dims(out, list(range(rank)), tile_target(prod(out)), {rank - 1: 64})
    grid, dims = grid_of(factors, list(range(rank))[::-1])
    bg = new_threadblock_graph(grid, THREADS, 1)
    window = op.window if isinstance(op, kernel.SliceOp) else None
    tile = bg.new_input(op.input, dims, -1, window=window)
    bg.new_output(tile, dims, t.element_type(op.result))
    return bg


def broadcast(op: kernel.BroadcastOp) -> BlockGraph:
    """Each stretched dim gets a grid dim of its size: every block along it
    reads the same tile and writes its own copy (``block.output`` places it
    by the omap). The other dims are tiled with the grid dims left."""
    out = t.tensor_shape(op.result)
    rank = len(out)
    source = lift(op.input, rank)
    stretched = [d for d in range(rank) if source[d] != out[d]]
    if len(stretched) > 3:
        raise OpVerifyError(
            op,
            f"'{op.name}' stretches {len(stretched)} dims; the default lowering "
            "gives each a grid dim, and a grid has three",
        )
    rest = [d for d in range(rank) if d not in stretched][::-1]
    tile = tuple(1 if d in stretched else n for d, n in enumerate(out))
    factors = split_dims(tile, rest, tile_target(prod(out)), {rank - 1: 64})
    factors = dict(list(factors.items())[: 3 - len(stretched)])
    factors.update({d: out[d] for d in stretched})
    grid, dims = grid_of(factors, [*stretched, *rest])
    bg = new_threadblock_graph(grid, THREADS, 1)
    imap = [-1 if d in stretched else d for d in dims]
    bg.new_output(bg.new_input(op.input, imap, -1, rank), dims)
    return bg


def concat(op: kernel.ConcatOp) -> BlockGraph:
    """The grid tiles every dim but the joined one; each block reads both
    pieces of its rows and joins them (``block.concat``)."""
    out = t.tensor_shape(op.result)
    joined = op.dim.value.data
    rank = len(out)
    kept = [d for d in range(rank) if d != joined][::-1]
    factors = split_dims(out, kept, tile_target(prod(out)), {rank - 1: 64})
    grid, dims = grid_of(factors, kept)
    bg = new_threadblock_graph(grid, THREADS, 1)
    parts = [bg.new_input(v, dims, -1) for v in op.operands]
    bg.new_output(bg.concat(*parts, joined), dims)
    return bg


PARTITIONS: dict[str, Callable[..., BlockGraph]] = {
    **{kind: elementwise for kind in elementwise_kinds("kernel")},
    "reduce_sum": reduce_sum,
    "reduce_max": reduce_max,
    "rms_norm": rms_norm,
    "matmul": matmul,
    "transpose": transpose,
    "slice": copy,
    "cast": copy,
    "broadcast": broadcast,
    "concat": concat,
}
"""Default partition of each kernel op, by ``KIND`` (``kernel.reshape`` is no
kernel: the lowering gives it its operand's buffer)."""

EPILOGUE_KINDS = frozenset(elementwise_kinds("kernel"))
"""Ops a split-K combine kernel runs after the sum."""


def customize(op: t.TensorOp) -> kernel.CustomizedOp:
    """A one-op customized kernel computing the same tensor as ``op``."""
    return PARTITIONS[op.KIND](op).customized_op()


def split_matmul(op: kernel.MatmulOp, target: Target) -> list[Operation] | None:
    """Replace a skinny ``op`` and its epilogue by the kernels of
    ``split_k``; the ops replaced, or None when ``op`` is no skinny matmul."""
    rows = skinny_rows(op)
    if rows is None:
        return None
    elem_bytes = 4 if str(t.element_type(op.result)) == "f32" else 2
    k, n = t.tensor_shape(op.rhs)[-2:]
    epilogue = epilogue_of(op, EPILOGUE_KINDS)
    prologue = prologue_of(op)
    sibling = sibling_of(op, epilogue)
    plan = plan_split_k(
        rows, n, k, elem_bytes, target, k_major(op.rhs), 2 if sibling else 1
    )
    if plan.splits != 1:  # a pair is read in one kernel only unsplit
        sibling = None
        plan = plan_split_k(rows, n, k, elem_bytes, target, k_major(op.rhs))
    last = epilogue[-1] if epilogue else op
    new, result = split_k_ops(op, plan, THREADS, epilogue, prologue, sibling)
    Rewriter.insert_op(new, InsertPoint.before(last))
    last.results[0].replace_all_uses_with(result)
    replaced: list[Operation] = [op, *([sibling] if sibling else []), *epilogue]
    for old in reversed(replaced):
        old.detach()
        old.erase()
    # the prologue's ops that nothing else reads (the norm of a projection,
    # of all of them when every projection of the rows took it in)
    for old in reversed(prologue.ops() if prologue is not None else []):
        if all(not r.uses for r in old.results):
            old.detach()
            old.erase()
            replaced.append(old)
    return replaced


@dataclass(frozen=True)
class DefaultCustomizePass(ModulePass):
    """Turn every bare kernel op into a ``kernel.customized`` op with a default partition.

    Element-wise ops tile their output over the grid; ``reduce_sum`` and
    ``matmul`` tile their output and walk the reduced (contraction) dim with
    the for-loop, accumulating in fp32; a matmul of at most 16 rows (a decode
    projection) gets 64-column strips of its weight, is split over its
    contraction dim too where that fills the GPU (partial sums, then a
    combine kernel), and its last kernel also runs the element-wise ops
    continuing the product, such as a residual add, while an RMSNorm making
    its rows is computed inside its kernels (``split_k``);
    ``rms_norm`` gives each block whole rows; ``transpose`` tiles the swapped
    dims. ``kernel.reshape`` stays (the lowering makes it a buffer alias). The
    result computes the same function (the interpreter checks it) and is what
    ``lower-to-gpu`` expects.
    """

    name = "default-customize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        done: set[Operation] = set()
        # skinny matmuls first, while the norms before them are still ops
        for inner in list(op.walk()):
            if inner not in done and isinstance(inner, kernel.MatmulOp):
                replaced = split_matmul(inner, current())
                if replaced is not None:
                    done.update(replaced)
        for inner in list(op.walk()):
            if inner in done or not isinstance(inner, t.TensorOp):
                continue
            if not inner.name.startswith("kernel.") or is_alias(inner):
                continue
            new = customize(inner)
            Rewriter.replace_op(inner, new, new.results)


def has_bare_ops(module: ModuleOp) -> bool:
    """Whether ``module`` holds a kernel op with no kernel of its own yet
    (a library op, not an alias of its operand's buffer)."""
    return any(
        isinstance(op, t.TensorOp)
        and op.name.startswith("kernel.")
        and not is_alias(op)
        for op in module.walk()
    )


def customize_bare_ops(module: ModuleOp, ctx: Context) -> None:
    """Give each bare kernel op of ``module`` its default kernel, in place: what
    every code generator does first, since a search may keep its input (a
    program of library ops) when nothing it found was faster."""
    if has_bare_ops(module):
        DefaultCustomizePass().apply(ctx, module)
