"""From a µGraph module to a :class:`TritonProgram`, and the ``triton`` target.

:func:`generate_triton` runs whatever the module still needs on a copy
(``fold-transposes``, ``fold-slices``, ``default-customize`` for bare kernel ops, then
``legalize-for-triton``) and
prints one ``@triton.jit`` kernel per ``kernel.customized`` op. A kernel with a
matmul of few rows gets a second form (suffix ``_fma``, multiply-and-sum
instead of tensor cores) and, where the product is summed over the for-loop,
a third (``_defer``, summed over K once, after the loop); the autotuner keeps
the fastest. Device tensors
between kernels stay in global memory, as intermediates; a ``kernel.reshape``
(or a contiguous ``kernel.slice``) is no kernel but another name for its
operand's buffer, from an offset (``aliases.py``).

``-t triton`` prints the program as a self-contained Python module: the
kernels, the launch plan (``BUFFERS``, ``LAUNCHES``: grids, arguments, order)
and a ``run(*inputs)`` that launches it through Triton on torch tensors.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import IO

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.ir import SSAValue
from xdsl.utils.target import Target

from mirage_xdsl.dialects import kernel
from mirage_xdsl.dialects import tensor_ops as t
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.lowering.aliases import (
    is_alias,
    offsets_of,
    output_storage,
    storage_of,
)
from mirage_xdsl.lowering.program import BufferSpec, of_kind
from mirage_xdsl.lowering.triton_legalize import (
    MATMUL_ATTR,
    TILE_ATTR,
    LegalizeForTritonPass,
)
from mirage_xdsl.lowering.triton_printer import (
    kernel_source,
    print_kernel,
    signature,
)
from mirage_xdsl.semantics.interpreter import entry_function

FORMS = ("dot", "fma", "defer")
"""Matmul forms a kernel may be printed in; ``dot`` first (the default)."""


@dataclass(frozen=True)
class TritonKernel:
    """One launch of the plan: a kernel, its forms, its grid and its buffers."""

    name: str
    variants: tuple[str, ...]
    """Names of the printed forms of this kernel (``name``, ``name_fma``,
    ``name_defer``)."""
    grid: tuple[int, int, int]
    forloop: int
    args: tuple[str, ...]
    signature: tuple[str, ...]
    """Triton pointer types of ``args`` (``*fp16``, ...)."""
    text: str = ""
    """The printed source of every form: what an autotuning choice is keyed by."""
    largest_tile: int = 0
    """Elements of the largest padded register tile (for the no-GPU heuristic)."""
    dot_variants: tuple[str, ...] = ()
    """The forms whose for-loop multiplies with ``tl.dot``: the only loads
    Triton's software pipeline stages, so the only forms whose number of
    stages matters."""
    offsets: tuple[int, ...] = ()
    """Each of ``args``' first element in its buffer (non-zero for a
    contiguous slice, an alias of its operand's buffer: ``aliases.py``)."""


@dataclass(frozen=True)
class TritonProgram:
    """A Python module of Triton kernels plus the buffers and launches of one function."""

    function: str
    source: str
    buffers: tuple[BufferSpec, ...]
    kernels: tuple[TritonKernel, ...]

    def inputs(self) -> list[BufferSpec]:
        return of_kind(self.buffers, "input")

    def outputs(self) -> list[BufferSpec]:
        return of_kind(self.buffers, "output")


def customized_module(module: ModuleOp) -> ModuleOp:
    """A copy of ``module`` whose functions hold only ``kernel.customized`` ops
    (and reshapes); kernels read a transpose's or a slice's operand in place
    where they can (``fold-transposes``, ``fold-slices``), and compute a
    small row-local kernel's rows themselves (``fold-producers``)."""
    from mirage_xdsl.lowering.default_customize import DefaultCustomizePass
    from mirage_xdsl.lowering.fold_producers import FoldProducersPass
    from mirage_xdsl.lowering.fold_slices import FoldSlicesPass
    from mirage_xdsl.lowering.fold_transposes import FoldTransposesPass

    module = module.clone()
    if any(
        isinstance(op, t.TensorOp) and op.name.startswith("kernel.")
        for op in module.walk()
    ):
        FoldTransposesPass().apply(make_context(), module)
        FoldSlicesPass().apply(make_context(), module)
        DefaultCustomizePass().apply(make_context(), module)
        FoldProducersPass().apply(make_context(), module)
    return module


def legalized(module: ModuleOp, small_matmul: str) -> ModuleOp:
    module = module.clone()
    LegalizeForTritonPass(small_matmul=small_matmul).apply(make_context(), module)
    return module


def _customized_ops(fn: func.FuncOp) -> list[kernel.CustomizedOp]:
    ops = []
    for op in fn.body.block.ops:
        if isinstance(op, kernel.CustomizedOp):
            ops.append(op)
        elif not isinstance(op, func.ReturnOp) and not is_alias(op):
            raise MirageError(
                f"error: '{op.name}' in @{fn.sym_name.data} cannot be lowered to "
                "Triton; only 'kernel.customized' ops and bare kernel ops can"
            )
    return ops


def _buffers(
    fn: func.FuncOp, ops: list[kernel.CustomizedOp]
) -> tuple[list[BufferSpec], dict[SSAValue, str]]:
    """The buffers of ``fn`` and the name of each value's buffer: a reshape
    names its operand's buffer (``aliases.py``), and a kernel whose result is
    returned, reshaped or not, writes the output buffer."""
    storage = storage_of(fn)
    outputs = output_storage(
        fn, storage, "", "the Triton backend writes every output with a kernel"
    )
    roots: dict[SSAValue, str] = {}
    buffers: list[BufferSpec] = []

    def spec(value: SSAValue, name: str, kind: str, index: int) -> None:
        ty = value.type
        assert isinstance(ty, TensorType)
        buffers.append(
            BufferSpec(name, tuple(ty.get_shape()), str(ty.element_type), kind, index)  # type: ignore[arg-type]
        )

    for i, arg in enumerate(fn.args):
        roots[arg] = f"input{i}"
        spec(arg, roots[arg], "input", i)
    returned = fn.body.block.last_op.operands  # type: ignore[union-attr]
    for root, j in sorted(outputs.items(), key=lambda item: item[1]):
        roots[root] = f"output{j}"
        spec(returned[j], roots[root], "output", j)
    tmp = 0
    for op in ops:
        for r in op.results:
            if r not in roots:
                roots[r] = f"tmp{tmp}"
                spec(r, roots[r], "intermediate", -1)
                tmp += 1
    return buffers, {v: roots[root] for v, root in storage.items()}


def generate_triton(module: ModuleOp, function: str | None = None) -> TritonProgram:
    """Lower ``module`` as needed and return ``function``'s Triton program."""
    base = customized_module(module)
    forms = {form: legalized(base, form) for form in FORMS}
    try:
        fns = {form: entry_function(m, function) for form, m in forms.items()}
    except ValueError:
        raise MirageError(
            f"error: no function {function or ''} to lower".replace("  ", " ")
        ) from None
    fn = fns["dot"]
    ops = {form: _customized_ops(f) for form, f in fns.items()}
    buffers, names = _buffers(fn, ops["dot"])
    offset = offsets_of(fn)
    sources: list[str] = []
    kernels: list[TritonKernel] = []
    fname = fn.sym_name.data
    for i, op in enumerate(ops["dot"]):
        name = f"{fname}_k{i}"
        printed = print_kernel(op, name)
        texts = [printed.source]
        variants = [name]
        for form in FORMS[1:]:
            form_op = ops[form][i]
            if any(
                m.attributes[MATMUL_ATTR] == StringAttr(form)
                for m in form_op.entry.ops
                if m.name == "block.matmul"
            ):
                texts.append(kernel_source(form_op, f"{name}_{form}"))
                variants.append(f"{name}_{form}")
        sources += texts
        looped = op.forloop > 1
        dots = tuple(
            v
            for v, t_ in zip(variants, texts, strict=True)
            if looped and "tl.dot(" in t_
        )
        sig = list(signature(op).values())
        args = [names[v] for v in [*op.operands, *op.results]]
        offsets = [offset[v] for v in [*op.operands, *op.results]]
        if printed.scratch_elems:
            blocks = op.grid_dims[0] * op.grid_dims[1] * op.grid_dims[2]
            scratch = f"scratch{i}"
            buffers.append(
                BufferSpec(
                    scratch,
                    (blocks * printed.scratch_elems,),
                    "f32",
                    "intermediate",
                    -1,
                )
            )
            args.append(scratch)
            offsets.append(0)
            sig.append("*fp32")
        kernels.append(
            TritonKernel(
                name=name,
                variants=tuple(variants),
                grid=op.grid_dims,
                forloop=op.forloop,
                args=tuple(args),
                signature=tuple(sig),
                text="\n".join(texts),
                largest_tile=max(
                    (
                        prod(op_.attributes[TILE_ATTR].get_values())  # type: ignore[attr-defined]
                        for op_ in op.entry.ops
                        if TILE_ATTR in op_.attributes
                    ),
                    default=1,
                ),
                dot_variants=dots,
                offsets=tuple(offsets),
            )
        )
    program = TritonProgram(fname, "", tuple(buffers), tuple(kernels))
    return TritonProgram(
        fname, module_source(program, sources), program.buffers, program.kernels
    )


RUNNER = '''

def run(*inputs):
    """Run the program on torch tensors through Triton's own launcher."""
    import torch

    dtypes = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
    buf = {}
    for b in BUFFERS:
        if b["kind"] == "input":
            buf[b["name"]] = inputs[b["index"]]
        else:
            buf[b["name"]] = torch.empty(
                b["shape"], dtype=dtypes[b["dtype"]], device=inputs[0].device
            )
    for launch in LAUNCHES:
        kernel = globals()[launch["kernels"][0]]
        args = zip(launch["args"], launch["offsets"])
        kernel[tuple(launch["grid"])](*[buf[a].reshape(-1)[o:] for a, o in args])
    outs = [buf[b["name"]] for b in BUFFERS if b["kind"] == "output"]
    return outs[0] if len(outs) == 1 else tuple(outs)
'''


HEADER = """import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

# Grid dependency control: each kernel waits for the one before it and lets the
# next start early. mirage-xdsl's runtime turns it on when it compiles these
# kernels for sm_90 and launches them programmatically; Triton's own launcher
# (run() below) launches plainly, so here it is off and the kernels compile for
# any GPU.
GRID_DEPENDENCY = tl.constexpr(False)


"""
"""What every generated module starts with."""


def module_source(program: TritonProgram, kernels: list[str]) -> str:
    """The self-contained Python module: kernels, launch plan, runner."""
    buffers = ",\n".join(
        f'    {{"name": "{b.name}", "shape": {list(b.shape)}, "dtype": "{b.dtype}", '
        f'"kind": "{b.kind}", "index": {b.index}}}'
        for b in program.buffers
    )
    launches = ",\n".join(
        f'    {{"kernels": {list(k.variants)}, "grid": {list(k.grid)}, '
        f'"args": {list(k.args)}, "offsets": {list(k.offsets)}}}'
        for k in program.kernels
    )
    return (
        f'"""Triton kernels of @{program.function}, generated by mirage-xdsl."""\n\n'
        + HEADER
        + "\n\n".join(kernels)
        + f"\n\nBUFFERS = [\n{buffers},\n]\n"
        + f"\nLAUNCHES = [\n{launches},\n]\n"
        + RUNNER
    )


def generate_source(module: ModuleOp) -> str:
    """The Triton module of the module's entry function."""
    return generate_triton(module).source


@dataclass(frozen=True)
class TritonTarget(Target):
    """A Python module of ``@triton.jit`` kernels and the launch plan
    (``default-customize`` and ``legalize-for-triton`` run first where needed)."""

    name = "triton"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(generate_source(module))
