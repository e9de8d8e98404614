"""Run generated Triton kernels in Triton's CPU interpreter and compare with ours.

Started by ``tests/test_triton.py`` in a subprocess with ``TRITON_INTERPRET=1``
(Triton reads it at import). Prints one JSON line per case:
``{"case": ..., "form": ..., "errors": [...]}`` or ``{"case": ..., "error": ...}``.

    TRITON_INTERPRET=1 python tests/triton_interpret.py workloads 8 [BATCH ...] [--small]
    TRITON_INTERPRET=1 python tests/triton_interpret.py random 20
    TRITON_INTERPRET=1 python tests/triton_interpret.py file PATH.mlir
    TRITON_INTERPRET=1 python tests/triton_interpret.py activations 0
    TRITON_INTERPRET=1 python tests/triton_interpret.py softmax 0
    TRITON_INTERPRET=1 python tests/triton_interpret.py layout 0
    TRITON_INTERPRET=1 python tests/triton_interpret.py slices 0
    TRITON_INTERPRET=1 python tests/triton_interpret.py ops 0
    TRITON_INTERPRET=1 python tests/triton_interpret.py rotary 0
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
import traceback

import numpy as np
import torch

from mirage_xdsl.lowering.triton import FORMS, generate_triton
from mirage_xdsl.runtime.triton_compile import load_source
from mirage_xdsl.semantics import interpreter

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def run_form(program, inputs, form: int) -> list[np.ndarray]:
    """Launch every kernel of ``program`` (form ``form`` where it has one)."""
    buf = {}
    for b in program.buffers:
        if b.kind == "input":
            buf[b.name] = torch.tensor(inputs[b.index]).to(DTYPES[b.dtype])
        else:
            buf[b.name] = torch.full(b.shape, float("nan"), dtype=DTYPES[b.dtype])
    kernels = load_source(program.source)
    for k in program.kernels:
        name = k.variants[min(form, len(k.variants) - 1)]
        args = zip(k.args, k.offsets, strict=True)
        kernels[name][k.grid](*[buf[a].view(-1)[o:] for a, o in args])
    return [buf[b.name].float().numpy() for b in program.outputs()]


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    if np.isnan(got).any():
        return float("nan")
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


def check(case: str, module, inputs, ref=None) -> None:
    """Compare every form of ``module``'s kernels with ``ref`` (by default the
    interpreter's outputs on ``inputs``)."""
    try:
        program = generate_triton(module)
        if ref is None:
            ref = interpreter.run(module, inputs)
        forms = max(len(k.variants) for k in program.kernels)
        for form in range(forms):
            outs = run_form(program, inputs, form)
            errors = [rel_error(o, r) for o, r in zip(outs, ref, strict=True)]
            print(json.dumps({"case": case, "form": FORMS[form], "errors": errors}))
    except Exception as e:
        print(
            json.dumps(
                {
                    "case": case,
                    "error": f"{type(e).__name__}: {e}",
                    "trace": traceback.format_exc()[-2000:],
                }
            )
        )
    sys.stdout.flush()


SMALL_GRID = {"blocks": 8, "forloop": 8, "splits": 2}
"""Grid and for-loop sizes for hand-written µGraphs in ``--small`` runs: the
interpreter runs every block and every iteration one after another, so the
same µGraph with fewer, larger tiles checks the same code in far less time."""


def sized(build, small: bool):
    """``build`` with the ``SMALL_GRID`` sizes it takes, when ``small``."""
    if not small:
        return build
    params = inspect.signature(build).parameters
    return functools.partial(
        build, **{k: v for k, v in SMALL_GRID.items() if k in params}
    )


def workloads(scale: int, batches: tuple[int, ...] = (1, 8), small=False) -> None:
    from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS, random_inputs

    builders = [(n, w.module) for n, w in sorted(WORKLOADS.items())]
    builders += [(n, sized(b, small)) for n, (_, b) in sorted(HANDWRITTEN.items())]
    for name, build in builders:
        for batch in batches:
            module = build(batch, scale)
            check(f"{name} b={batch}", module, random_inputs(module, batch, -0.5, 0.5))


def random_cases(count: int, first: int = 0) -> None:
    from mirage_xdsl.fuzz.programs import random_inputs, random_module

    for seed in range(first, first + count):
        rng = np.random.default_rng(seed)
        module = random_module(rng)
        check(f"random {seed}", module, random_inputs(module, seed))


def file_case(path: str) -> None:
    from mirage_xdsl.ir.context import make_context
    from mirage_xdsl.ir.diagnostics import parse
    from mirage_xdsl.semantics.inputs import random_inputs

    with open(path) as f:
        text = f.read()
    # Triton's interpreter multiplies bf16 tl.dot operands wrongly (3.9: a
    # 16 x 16 product off by 2.5e10; f16 exact), so bf16 programs are
    # checked as f16: the same kernels, another element type
    module = parse(make_context(), text.replace("xbf16>", "xf16>"), path)
    check(path, module, random_inputs(module, 0))


def activation_cases() -> None:
    """The program using every activation op (``tests/activation_program.py``),
    plain and with its block ops fused into a thread graph."""
    from activation_program import activation_module

    from mirage_xdsl.workloads import random_inputs

    for fused in (False, True):
        module = activation_module(fused)
        check(f"activations fused={fused}", module, random_inputs(module, 0, -2, 2))


def softmax_cases() -> None:
    """Softmax on inputs of natural scale (normal times 10, in fp16), against
    the exact float64 softmax: the safe programs (kernel ops, one customized
    kernel, and its thread-graph form) and the plain one, whose exp the
    kernels reading it compute in fp32 (``fold-producers``). Row lengths 100
    (padded to 128) and 20 (shorter than a warp)."""
    from softmax_program import (
        blocked_softmax_module,
        large_inputs,
        online_attention_module,
        reference_attention,
        reference_softmax,
        softmax_module,
    )

    for shape in ((8, 100), (6, 20), (4, 3, 40)):
        x = large_inputs(shape)
        ref = [reference_softmax(x)]
        programs = {
            "safe": softmax_module(shape),
            "plain": softmax_module(shape, safe=False),
            "blocked": blocked_softmax_module(shape),
            "blocked fused": blocked_softmax_module(shape, fused=True),
        }
        for name, module in programs.items():
            check(f"softmax {name} {list(shape)}", module, [x], ref)
    module = online_attention_module()
    q, k, v = (
        large_inputs(tuple(a.type.get_shape()), seed, 2.0)
        for seed, a in enumerate(module.body.block.ops.first.args)
    )
    check("online attention", module, [q, k, v], [reference_attention(q, k, v)])


def layout_cases() -> None:
    """The programs with transposes and reshapes (``tests/layout_program.py``)."""
    from layout_program import PROGRAMS

    from mirage_xdsl.workloads import random_inputs

    for name, build in PROGRAMS.items():
        module = build()
        check(f"layout {name}", module, random_inputs(module, 0, -0.5, 0.5))


def slice_cases() -> None:
    """The programs with slices (``tests/slice_program.py``): contiguous ones
    read in place, the others copied."""
    from slice_program import PROGRAMS

    from mirage_xdsl.workloads import random_inputs

    for name, build in PROGRAMS.items():
        module = build()
        check(f"slices {name}", module, random_inputs(module, 0, -0.5, 0.5))


def op_cases() -> None:
    """Each element-wise op of the op table (``tests/op_program.py``), at the
    kernel and block levels, unfused and in a thread graph."""
    from op_program import KINDS, op_inputs, op_module

    for kind in KINDS:
        for fused in (False, True):
            module = op_module(kind, fused)
            check(f"{kind} fused={fused}", module, op_inputs(module))


def rotary_cases() -> None:
    """The rotary embedding written as plain torch (``tests/rotary_program.py``),
    captured and searched into one kernel, against torch in fp32 and fp16."""
    from rotary_program import DTYPES, example, reference, searched

    for dtype in DTYPES:
        xs = example(dtype)
        module = searched(dtype).module
        check(
            f"rotary {dtype}",
            module,
            [x.float().numpy() for x in xs],
            [reference(xs).numpy()],
        )


if __name__ == "__main__":
    if sys.argv[1] == "file":
        for path in sys.argv[2:]:
            file_case(path)
        sys.exit()
    small = "--small" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--small"]
    what, n = args[0], int(args[1])
    if what == "workloads":
        workloads(n, tuple(int(b) for b in args[2:]) or (1, 8), small)
    elif what == "activations":
        activation_cases()
    elif what == "softmax":
        softmax_cases()
    elif what == "layout":
        layout_cases()
    elif what == "slices":
        slice_cases()
    elif what == "ops":
        op_cases()
    elif what == "rotary":
        rotary_cases()
    else:
        random_cases(n, int(sys.argv[3]) if len(sys.argv) > 3 else 0)
