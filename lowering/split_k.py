"""Split-K: the default partition of a skinny matmul (a decode projection).

A matmul of a few rows (``M <= 16``, a batch-1..16 decode step) against a
weight of ``K x N`` moves the weight and little else, so it runs at the speed
it reads the weight. Tiling only the output gives ``N / 64`` blocks, too few
to keep the GPU's memory busy (a 2048-column projection would run on 32 of
the H100's 132 SMs). Split-K also splits the contraction dim over the grid:

- the *partial* kernel: block ``(j, s)`` multiplies the rows by the weight's
  column strip ``j`` (``n_tile`` columns: 128-byte rows, so every load is a
  whole line) over slice ``s`` of ``K``, walking it with the for-loop in
  chunks of ``k_tile`` (a weight tile of :data:`WEIGHT_TILE_BYTES` per
  iteration), and stores its ``M x n_tile`` partial sum at rows
  ``s * M ...`` of a ``[S * M, N]`` buffer;
- the *combine* kernel reads that buffer as ``[S, M, N]`` (a reshape: no
  copy), sums the ``S`` partials of each output tile in one load and one
  ``reduce_sum``, applies the epilogue (a residual add, say) and stores.

An RMSNorm making the rows rides along (``norm_prologue.py``): the partial
kernel scales the chunks it loads, and the kernel that finishes each output
tile divides by the rows' RMS.

A weight read transposed (an ``nn.Linear`` weight, ``[N, K]``) gets narrow
strips (:data:`K_MAJOR_STRIPS`), and the gate and up projections of a gated
MLP, unsplit, are one partial kernel (:func:`sibling_of`).

``S`` is the smallest split that gives the grid enough blocks to fill the
target's SMs about twice (``blocks_to_aim_for``), so each block still walks a
long stretch of ``K`` and the partial sums stay small next to the weight
(``S * M * N`` against ``K * N``). A matmul is split only when that reads the
weight sooner by more than a launch costs (:func:`read_seconds`: too few
blocks cannot use all of the memory's bandwidth, each keeping about one
weight tile in flight).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from math import prod

from xdsl.ir import BlockArgument, Operation, SSAValue

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.gpu_target import Target
from mirage_xdsl.ir.builder import BlockGraph, new_threadblock_graph
from mirage_xdsl.lowering.norm_prologue import (
    ROW_TILE,
    Prologue,
    apply_chain,
    row_scale,
    sum_of_squares,
)

SKINNY_ROWS = 16
"""Most rows a matmul may have to be split over ``K`` by default."""
COLUMN_TILES = (64, 32, 16)
"""Column strips of the weight a block may own, widest first (64 halves:
one 128-byte line per weight row)."""
WEIGHT_TILE_BYTES = 16 * 1024
"""Bytes of weight one block loads per for-loop iteration."""
COMBINE_TILE = 4096
"""Most elements the combine kernel sums per block."""
K_MAJOR_STRIPS = ((1, 1, 2 * 1024), (2, 4, 8 * 1024), (SKINNY_ROWS, 16, 8 * 1024))
"""Columns of the product a block owns where the weight is read transposed
(an ``nn.Linear`` weight, ``[N, K]``: each column's ``K`` values contiguous),
and bytes of it the block loads per for-loop iteration, by the most rows each
applies to: every block's loads are whole lines however narrow its strip,
and narrow strips make many small blocks, whose loads are all in flight at
once. One row takes single columns in 2 KB chunks (its terms are kept
``N x K``, ``triton_matmul.column_terms``), two rows 4 columns (their
multiply-and-sum forms keep ``rows x 4 x k_tile`` terms), more take 16 (the
least a ``tl.dot`` tile has). On an H100 at one row, single columns in 2 KB
chunks read 8192 -> 2048 in 14.1 µs and 2048 -> 16384 in 24.8, where 4
columns in 8 KB chunks took 15.2 and 26.4 (``tools/bench_projections.py``)."""
BLOCK_SECONDS = 160e-9
"""What one block of a one-row projection costs its multiprocessor however
little it reads: launching it, its first load's wait and retiring it,
overlapped with the other blocks there. 128256 blocks of one 4 KB column
each (2048 -> 128256, a Llama-3.2-1B-shaped head) took 155.3 µs on an
H200's 132 SMs, 160 ns a block, where the weight's read at the copy
bandwidth takes 122 (strips of 2 and 4 columns read it in 122.6 and 121.9,
``tools/sweep_split_k.py --transposed``); on an H100, 151936 blocks of one
1.75 KB column (896 -> 151936) took 182.7 µs, 159 ns a block."""
JOINED_STRIPS_PER_SM = 8
"""The fewest joined one-row strips per multiprocessor (1056 on an H100): the
896 -> 9728 projection's 2432 strips of four read it in 9.1 µs against 11.6
as single columns; 224 and 288 strips of four were no faster than single
columns."""


@dataclass(frozen=True)
class SplitK:
    """How a skinny matmul is split: column strips, K chunks and K slices."""

    n_tile: int
    k_tile: int
    splits: int
    k: int

    @property
    def forloop(self) -> int:
        """For-loop iterations of each block of the partial kernel."""
        return self.k // (self.splits * self.k_tile)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def one_row_block_bytes(target: Target) -> int:
    """The least weight a one-row block should read on ``target``: what its
    share of the memory's bandwidth moves in :data:`BLOCK_SECONDS`. A block
    reading less is bound by its launch, not the memory, so a column of fewer
    bytes is joined by its neighbours (in powers of two) until the block's
    strip holds this much, each chunk as many 2 KB as columns. On an H100
    that is 3.6 KB: the 1.75 KB columns of a Qwen2.5-0.5B-shaped head (896 ->
    151936) go in fours, which read it in 95.5 µs where single columns took
    182.7 and pairs 98.1 (90.2 µs at the copy bandwidth), and 4 KB columns
    (K = 2048) stay single, as fast as strips there
    (``docs/bench/one_row_strips_h100.json``). On an H200 it is 5.1 KB, so 4
    KB columns go in pairs (the 2048 -> 128256 head: 122.9 µs against 155.3,
    ``docs/bench/one_row_strips_h200.json``). A gated MLP's gate and up, read
    by one kernel, are left as single columns (the pair's segment of the
    Qwen2.5 layer took 9.6 µs with four-column strips, 9.0 without), and so
    are projections whose joined strips would number fewer than
    :data:`JOINED_STRIPS_PER_SM` a multiprocessor (896 -> 896 and 896 -> 1152
    took 2.96 and 3.15 µs in fours, 2.90 and 3.08 as single columns)."""
    return int(BLOCK_SECONDS * target.dram_bandwidth / target.sms)


def blocks_to_aim_for(target: Target) -> int:
    """About two blocks per SM of ``target``, rounded down to a power of two
    (as the sizes being split usually are): 256 on the H100's 132 SMs."""
    return 1 << ((2 * target.sms).bit_length() - 1)


def block_bandwidth(target: Target, tile_bytes: int = WEIGHT_TILE_BYTES) -> float:
    """Bytes per second one block of the partial kernel reads: one weight
    tile per load round trip (what the multiply-and-sum form, which Triton
    does not pipeline, keeps in flight; the tensor-core form's pipeline
    keeps more, so this errs towards more blocks)."""
    return tile_bytes / target.load_latency_seconds


def read_seconds(
    weight_bytes: int, blocks: int, target: Target, tile_bytes: int = WEIGHT_TILE_BYTES
) -> float:
    """How long ``blocks`` blocks take to read the weight: the device memory's
    bandwidth, or fewer blocks' own if they cannot use all of it."""
    bandwidth = min(target.dram_bandwidth, blocks * block_bandwidth(target, tile_bytes))
    return weight_bytes / bandwidth


def skinny_rows(op: kernel.MatmulOp) -> int | None:
    """The rows of ``op`` seen as one ``[rows, K] x [K, N]`` product (a weight
    shared by every batch index, the rows of all batches stacked), when
    there are at most :data:`SKINNY_ROWS` of them; None otherwise."""
    rhs = t.tensor_shape(op.rhs)
    rows = prod(t.tensor_shape(op.result)[:-1])
    if any(d != 1 for d in rhs[:-2]) or rows > SKINNY_ROWS:
        return None
    return rows


def plan_split_k(
    rows: int,
    n: int,
    k: int,
    elem_bytes: int,
    target: Target,
    k_major: bool = False,
    weights: int = 1,
) -> SplitK:
    """How a ``[rows, k] x [k, n]`` product is split on ``target``.

    A weight stored ``[K, N]`` gets 64-column strips (one 128-byte line per
    weight row) and 16 KB chunks, enough blocks for about two per SM. A
    ``k_major`` one (stored ``[N, K]``, read transposed) gets the narrow
    strips and chunks of :data:`K_MAJOR_STRIPS`, enough blocks for one
    per SM: its strips are many already. Either is split over ``K`` only when
    that reads the weight sooner by more than the combine kernel's launch
    costs. ``weights`` is how many weights of this shape each block reads
    (2 for a gated MLP's gate and up, :func:`sibling_of`): one-row columns
    are joined (:func:`one_row_block_bytes`) for one weight only."""
    if k_major:
        width, tile_bytes = next(
            (c, b) for most, c, b in K_MAJOR_STRIPS if rows <= most
        )
        if width == 1 and weights == 1:
            joined, least = 1, one_row_block_bytes(target)
            while (
                joined * k * elem_bytes < least
                and n // (2 * joined) >= JOINED_STRIPS_PER_SM * target.sms
            ):
                joined *= 2
            width, tile_bytes = joined, joined * tile_bytes
        widths = (width, 16, 1)
        aim = blocks_to_aim_for(target) // 2
    else:
        widths, tile_bytes = COLUMN_TILES, WEIGHT_TILE_BYTES
        aim = blocks_to_aim_for(target)
    n_tile = next((c for c in widths if n % c == 0), n)
    strips = n // n_tile
    k_tile = max(d for d in _divisors(k) if d * n_tile * elem_bytes <= tile_bytes)
    chunks = k // k_tile
    splits = next((s for s in _divisors(chunks) if strips * s >= aim), chunks)
    weight = k * n * elem_bytes
    gain = read_seconds(weight, strips, target, tile_bytes) - read_seconds(
        weight, strips * splits, target, tile_bytes
    )
    if gain <= target.launch_seconds:
        splits = 1
    return SplitK(n_tile, k_tile, splits, k)


def k_major(weight: SSAValue) -> bool:
    """Whether a matmul's right operand is a program input read transposed
    (its last two dims swapped): each of its columns contiguous in memory."""
    op = weight.owner
    rank = len(t.tensor_shape(weight))
    return (
        isinstance(op, kernel.TransposeOp)
        and isinstance(op.input, BlockArgument)
        and sorted(op.dims) == [rank - 2, rank - 1]
    )


def sibling_of(
    op: kernel.MatmulOp, epilogue: Sequence[t.TensorOp]
) -> kernel.MatmulOp | None:
    """A matmul of ``op``'s rows by a weight of the same shape, type and
    layout whose product only one op of ``epilogue`` reads (the up
    projection of a gated MLP, ``silu(x @ g) * (x @ u)``, for the gate's):
    one kernel can read both weights' strips and combine the products. None
    if there is none."""
    for e in epilogue:
        for v in e.operands:
            other = v.owner
            if (
                isinstance(other, kernel.MatmulOp)
                and other is not op
                and other.lhs == op.lhs
                and other.rhs.type == op.rhs.type
                and k_major(other.rhs) == k_major(op.rhs)
                and len(list(other.result.uses)) == 1
            ):
                return other
    return None


def fits_rows(shape: Sequence[int], out: Sequence[int]) -> bool:
    """Whether an epilogue operand of ``shape`` is, like the result ``out``,
    a matrix of its rows (the leading dims of ``out``, or none) by columns."""
    lifted = (1,) * (len(out) - len(shape)) + tuple(shape)
    lead = lifted[:-1]
    return len(shape) <= len(out) and (
        lead == tuple(out[:-1]) or all(d == 1 for d in lead)
    )


def epilogue_of(op: kernel.MatmulOp, kinds: Collection[str]) -> list[t.TensorOp]:
    """The kernel ops of ``kinds`` that only continue ``op``'s result (a
    residual add, say): each the single user of the one before, of the same
    shape, its other operands matrices of the same rows (or one row)."""
    chain: list[t.TensorOp] = []
    value = op.result
    shape = t.tensor_shape(value)
    while len(uses := list(value.uses)) == 1:
        user = uses[0].operation
        if (
            not isinstance(user, t.TensorOp)
            or not user.name.startswith("kernel.")
            or user.KIND not in kinds
            or t.tensor_shape(user.results[0]) != shape
            or not all(fits_rows(t.tensor_shape(v), shape) for v in user.operands)
        ):
            break
        chain.append(user)
        value = user.results[0]
    return chain


View = Callable[[SSAValue, int], SSAValue]
"""A tensor seen with a given rank (its leading dims of 1 dropped or added)."""


def add_epilogue(
    bg: BlockGraph,
    value: SSAValue,
    product: SSAValue,
    epilogue: Sequence[t.TensorOp],
    omap: Sequence[int],
    view: View,
    tiles: dict[SSAValue, SSAValue] | None = None,
) -> SSAValue:
    """Apply ``epilogue`` (element-wise ops, each continuing the one before,
    the first ``product``) to ``value``, the block's tile of ``product`` (rows
    and columns last)
    stored by ``omap``; the other operands are read tile by tile, seen with
    the tile's rank (a broadcast dim of 1 is replicated), but those of
    ``tiles`` (a sibling product the block computed: its tile)."""
    rank = len(t.tensor_shape(value))
    previous = product
    tiles = tiles or {}
    for e in epilogue:
        args = []
        for v in e.operands:
            if v == previous:
                args.append(value)
                continue
            if v in tiles:
                args.append(tiles[v])
                continue
            seen = view(v, rank)
            shape = t.tensor_shape(seen)
            imap = [d if d >= 0 and shape[d] > 1 else -1 for d in omap]
            args.append(bg.new_input(seen, imap, -1))
        new = block.ELEMENTWISE_OPS[e.KIND](*args, *e.constant_args())
        bg.block.add_op(new)
        value = new.results[0]
        previous = e.results[0]
    return value


def partial_kernel(
    x: SSAValue,
    w: SSAValue,
    matmul_result: SSAValue,
    plan: SplitK,
    threads: Sequence[int],
    epilogue: Sequence[t.TensorOp],
    view: View,
    prologue: Prologue | None = None,
    sibling: tuple[SSAValue, SSAValue] | None = None,
) -> kernel.CustomizedOp:
    """Block ``(j, s)``: the rows ``x [M, K]`` times column strip ``j`` of
    ``w [K, N]`` over K slice ``s``, stored at rows ``s * M`` of the
    ``[S * M, N]`` partial sums. Unsplit (``S = 1``) that is the product
    itself, and the block applies ``epilogue`` before it stores. With a
    ``prologue`` (``x`` is then its source), each chunk of ``x`` goes
    through the prologue's chain as it is loaded; unsplit, the block also
    sums the squares of the chunks (all of each row) and divides by the
    rows' RMS. With a ``sibling`` (unsplit only: its weight, of ``w``'s
    shape, and the product it stands for, which ``epilogue`` reads), the
    block multiplies the same chunks of ``x`` by strip ``j`` of that weight
    too."""
    n = t.tensor_shape(w)[-1]
    grid = (n // plan.n_tile, plan.splits, 1)
    bg = new_threadblock_graph(grid, threads, plan.forloop)
    loop = plan.forloop > 1
    xmap, fmap = [-1, 1, -1], 1 if loop else -1
    tx = bg.new_input(x, xmap, fmap)
    squares = None
    if prologue is not None and plan.splits == 1:
        # the block walks all of K: it sums the squares of the chunks it loads
        squares = sum_of_squares(bg, tx)
        squares = bg.forloop_accum(squares) if loop else squares
    if prologue is not None:
        tx = apply_chain(
            bg, tx, prologue.chain, lambda v: bg.new_input(view(v, 2), xmap, fmap)
        )
    weights = [w] if sibling is None else [w, sibling[0]]
    values = []
    for weight in weights:
        product = bg.matmul(tx, bg.new_input(weight, [1, 0, -1], 0 if loop else -1))
        values.append(bg.forloop_accum(product) if loop else product)
    omap = [1, 0, -1]
    value = values[0]
    if plan.splits == 1:
        if squares is not None:  # a prologue's
            k = t.tensor_shape(x)[-1]
            scale = row_scale(bg, squares, k, prologue.norm)
            values = [bg.div(v, scale) for v in values]
        tiles = {} if sibling is None else {sibling[1]: values[1]}
        value = add_epilogue(bg, values[0], matmul_result, epilogue, omap, view, tiles)
    bg.new_output(value, omap)
    return bg.customized_op()


def combine_kernel(
    partials: SSAValue,
    matmul_result: SSAValue,
    epilogue: Sequence[t.TensorOp],
    threads: Sequence[int],
    view: View,
    prologue: Prologue | None = None,
) -> kernel.CustomizedOp:
    """Sum the ``[S, M, N]`` partial sums over ``S`` and apply ``epilogue``;
    the result is ``[1, M, N]``. With a ``prologue``, the sum is divided by
    the RMS of each of its source's rows first, the block summing the rows'
    squares over a for-loop in chunks of at most :data:`ROW_TILE` elements."""
    splits, m, n = t.tensor_shape(partials)
    width = max(d for d in _divisors(n) if splits * m * d <= COMBINE_TILE or d == 1)
    rows = view(prologue.source, 3) if prologue is not None else None
    k = t.tensor_shape(rows)[-1] if rows is not None else 1
    chunk = max(d for d in _divisors(k) if m * d <= ROW_TILE or d == 1)
    bg = new_threadblock_graph((n // width, 1, 1), threads, k // chunk)
    omap = [2, -1, -1]
    value = bg.reduction(bg.new_input(partials, omap, -1), 0)
    if prologue is not None and rows is not None:
        loop = k > chunk
        squares = sum_of_squares(
            bg, bg.new_input(rows, [-1, -1, -1], 2 if loop else -1)
        )
        squares = bg.forloop_accum(squares) if loop else squares
        value = bg.div(value, row_scale(bg, squares, k, prologue.norm))
    bg.new_output(add_epilogue(bg, value, matmul_result, epilogue, omap, view), omap)
    return bg.customized_op()


def split_k_ops(
    op: kernel.MatmulOp,
    plan: SplitK,
    threads: Sequence[int],
    epilogue: Sequence[t.TensorOp] = (),
    prologue: Prologue | None = None,
    sibling: kernel.MatmulOp | None = None,
) -> tuple[list[Operation], SSAValue]:
    """The kernels (and reshapes: no copies) computing ``op`` followed by
    ``epilogue`` (element-wise ops, each continuing the one before and
    reading nothing else computed from the product), and the value that
    replaces the last of them; with a ``prologue`` (``norm_prologue.prologue_of``),
    ``op``'s rows computed from the prologue's source as they are read; with
    a ``sibling`` (:func:`sibling_of`, ``plan`` unsplit), its product
    computed by the same kernel. The kernels see every tensor with the rank
    of their tiles (its leading dims, all 1, dropped or added), so the rows
    and columns are a plain matrix."""
    ops: list[Operation] = []

    def view(v: SSAValue, rank: int) -> SSAValue:
        shape = t.tensor_shape(v)
        core = (prod(shape[:-1]), shape[-1])
        want = (1,) * (rank - 2) + core
        if shape == want:
            return v
        reshape = kernel.ReshapeOp(v, want)
        ops.append(reshape)
        return reshape.result

    rows = op.lhs if prologue is None else prologue.source
    x, w = view(rows, 2), view(op.rhs, 2)
    assert sibling is None or plan.splits == 1
    pair = None if sibling is None else (view(sibling.rhs, 2), sibling.result)
    partial = partial_kernel(
        x, w, op.result, plan, threads, epilogue, view, prologue, pair
    )
    ops.append(partial)
    result = partial.results[0]
    if plan.splits > 1:
        m, n = t.tensor_shape(x)[0], t.tensor_shape(w)[1]
        parts = kernel.ReshapeOp(result, (plan.splits, m, n))
        ops.append(parts)
        combine = combine_kernel(
            parts.result, op.result, epilogue, threads, view, prologue
        )
        ops.append(combine)
        result = combine.results[0]
    final = t.tensor_shape((epilogue[-1] if epilogue else op).results[0])
    if t.tensor_shape(result) != final:
        back = kernel.ReshapeOp(result, final)
        ops.append(back)
        result = back.result
    return ops, result
