"""Random valid µGraphs, for fuzzing every subsystem that consumes them.

:func:`random_module` builds a seeded random program at all three levels: a
``func.func @main`` of kernel ops over random small tensors, some of them
``kernel.customized`` ops whose block graphs load tiles with random grids,
imaps, fmaps and for-loop ranges, compute with block ops (``forloop_accum``
of every reduction kind, ``concat``, ``thread_graph`` holding thread ops) and
save tiles with random omaps.

The generator builds valid graphs by construction, not by rejection: it only
picks operands whose shapes, element types and for-loop phases fit the op, and
only partition maps that divide. Every generated module passes
:func:`mirage_xdsl.ir.diagnostics.verify`; the tests check that on thousands of
seeds.

The generated programs are also numerically tame. Each value carries an
interval that bounds it when every input lies in ``[INPUT_LOW, INPUT_HIGH]``
(all positive, so every op is monotone on it), and an op is only added when
its result stays within ``[VALUE_MIN, VALUE_MAX]``. So on inputs from
:func:`random_inputs` the float interpreter, and fp16 GPU code, give finite,
normal values: a wrong result is a bug, never an overflow (see ``values``).

The parts live in modules of their own: ``values`` (value ranges, which kinds
are drawn), ``level_graph`` (one level's graph under construction),
``customized_kernels`` (block and thread graphs); this one builds the
function.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from mirage_xdsl.dialects import block, kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.dialects.block_structure import Phase
from mirage_xdsl.fuzz.customized_kernels import BLOCK_MENU, add_customized
from mirage_xdsl.fuzz.level_graph import Graph, Options
from mirage_xdsl.fuzz.values import (
    INPUT_HIGH,
    INPUT_LOW,
    UNFUZZED,
    VALUE_MAX,
    VALUE_MIN,
    Val,
    fuzzed,
)
from mirage_xdsl.ir.builder import float16
from mirage_xdsl.semantics import inputs

KERNEL_OPS = t.by_kind(kernel.Kernel)

KERNEL_MENU = tuple(filter(fuzzed, KERNEL_OPS))

KINDS = tuple(dict.fromkeys([*KERNEL_MENU, *BLOCK_MENU, "customized", "thread_graph"]))
"""Every op kind :func:`random_module` can be restricted to."""


def random_module(
    rng: np.random.Generator,
    *,
    max_ops: int = 6,
    max_block_ops: int = 6,
    customized_prob: float = 0.3,
    thread_graph_prob: float = 0.15,
    max_elements: int = 4096,
    dtypes: Sequence[Attribute] = (float16,),
    kinds: Collection[str] | None = None,
    reductions: Sequence[str] = block.ACCUM_REDUCTIONS,
) -> ModuleOp:
    """A random valid µGraph: ``func.func @main`` of kernel and customized ops.

    ``rng`` alone decides the module (same seed, same text). ``max_ops``
    bounds the kernel-level ops (at least one is made), ``max_block_ops`` the
    ops of each block graph; ``customized_prob`` is the chance that a
    kernel-level op is a ``kernel.customized``; ``thread_graph_prob`` the
    chance that a block-level op is a ``block.thread_graph``. Tensors have at
    most ``max_elements`` elements (except stitched customized results, which
    later ops do not read) and one element type drawn from ``dtypes``. Every
    value unused inside the function is returned, except the reshapes no
    kernel would write (:func:`drop_unwritten_views`), so both GPU backends
    take every module. See the module docstring for
    the value ranges on inputs from :func:`random_inputs`.

    ``kinds`` (default: all) restricts the ops to these ``KIND`` names (see
    :data:`KINDS`), ``"customized"`` and ``"thread_graph"`` included;
    ``reductions`` the ``block.forloop_accum`` reductions. A per-iteration
    value that a block saves is accumulated whatever ``kinds`` says, since the
    verifier requires it.
    """
    unknown = set(kinds or ()) - set(KINDS)
    if unknown or not set(reductions) <= set(block.ACCUM_REDUCTIONS):
        raise ValueError(f"unknown kinds or reductions: {sorted(unknown)}")
    opts = Options(
        max_ops, max_block_ops, max_elements, customized_prob, thread_graph_prob,
        tuple(dtypes), None if kinds is None else frozenset(kinds),
        tuple(reductions),
    )  # fmt: skip
    kernel_menu = opts.menu(KERNEL_MENU)
    dtype = opts.dtypes[int(rng.integers(len(opts.dtypes)))]
    body = Block()

    def fresh(shape: tuple[int, ...], phases: tuple[Phase, ...]) -> Val:
        arg = body.insert_arg(TensorType(dtype, list(shape)), len(body.args))
        kg.pool.append(Val(arg, INPUT_LOW, INPUT_HIGH))
        return kg.pool[-1]

    kg = Graph(rng, opts, KERNEL_OPS, body, fresh)
    for _ in range(int(rng.integers(1, 3))):
        rank = int(rng.integers(2, 5))
        shape = [kg.dim() for _ in range(rank)]
        while math.prod(shape) > max_elements:
            shape[int(np.argmax(shape))] //= 2
        fresh(tuple(shape), (Phase.INVARIANT,))

    def extra(kind: str) -> Val | None:
        return add_customized(kg) if kind == "customized" else None

    def draw() -> str:
        if opts.allowed("customized") and kg.coin(customized_prob):
            return "customized"
        return kg.choice(kernel_menu) if kernel_menu else "customized"

    kg.steps(int(rng.integers(1, max_ops + 1)), draw, extra)
    drop_unwritten_views(kg)
    for _ in range(16 if not body.ops else 0):
        kg.steps(1, (lambda: "sqrt") if kinds is None else draw, extra)
        if body.ops:
            break
    outputs = [v.value for v in kg.sinks() if isinstance(v.value.owner, Operation)]
    body.add_op(func.ReturnOp(*outputs))
    fn = func.FuncOp(
        "main",
        ([a.type for a in body.args], [v.type for v in outputs]),
        Region(body),
    )
    return ModuleOp([fn])


def drop_unwritten_views(kg: Graph) -> None:
    """Erase the unused reshapes no kernel would write, were they returned:
    those of an input, and all but one of the unused views of one value (a
    reshape is a buffer alias on the GPU, ``lowering/aliases.py``)."""
    storage: dict[SSAValue, SSAValue] = {}
    for v in kg.pool:
        op = v.value.owner
        view = isinstance(op, kernel.ReshapeOp)
        storage[v.value] = storage[op.input] if view else v.value  # type: ignore[union-attr]
    while True:
        kept: set[SSAValue] = set()
        dead = []
        for v in kg.sinks():
            root = storage[v.value]
            unwritten = not isinstance(root.owner, Operation) or root in kept
            if isinstance(v.value.owner, kernel.ReshapeOp) and unwritten:
                dead.append(v)
            kept.add(root)
        if not dead:
            return
        for v in dead:
            kg.pool.remove(v)
            v.value.owner.detach()
            v.value.owner.erase()


def random_inputs(module: ModuleOp, seed: int = 0) -> list[np.ndarray]:
    """fp16 inputs in ``[INPUT_LOW, INPUT_HIGH]``, where the value ranges hold."""
    return inputs.random_inputs(module, seed, INPUT_LOW, INPUT_HIGH)


__all__ = [
    "BLOCK_MENU",
    "INPUT_HIGH",
    "KERNEL_MENU",
    "KINDS",
    "INPUT_LOW",
    "UNFUZZED",
    "VALUE_MAX",
    "VALUE_MIN",
    "random_inputs",
    "random_module",
]
