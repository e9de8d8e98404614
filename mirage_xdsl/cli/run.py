"""``mirage-run``: execute a µGraph program on random inputs and summarise it.

The reference interpreter runs the program with the GPU's partition
semantics in fp32; ``--compare REF.mlir`` runs a second program on the same
inputs and reports the largest relative difference, so a rewritten program
can be checked against its source from the shell. ``--device cuda`` also
lowers the program to CUDA, runs it on the GPU (through the runtime, with
fresh inputs scaled to stay in fp16 range) and compares the GPU's outputs with
the interpreter's.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.gpu_target import UnknownTarget
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import MirageError, error_line, parse, verify
from mirage_xdsl.semantics.inputs import random_inputs
from mirage_xdsl.semantics.interpreter import entry_function, run

MAX_INPUT_ELEMENTS = 1 << 28
"""Programs whose inputs hold more elements than this are not interpreted."""


def load(path: str) -> ModuleOp:
    """Read, parse and verify a program that has a function to run."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise MirageError(f"{path}: error: {e.strerror}") from None
    module = parse(make_context(), data, path)
    verify(module)
    try:
        fn = entry_function(module)
    except ValueError:
        raise MirageError(f"{path}: error: no function to run") from None
    shapes = [t.get_shape() for t in fn.function_type.inputs.data]  # type: ignore[attr-defined]
    elements = sum(math.prod(s) for s in shapes)
    if elements > MAX_INPUT_ELEMENTS:
        raise MirageError(
            f"{path}: error: '{fn.sym_name.data}' takes {elements} input elements, "
            f"more than the interpreter's limit of {MAX_INPUT_ELEMENTS}"
        )
    return module


def summarise(name: str, values: Sequence[np.ndarray]) -> list[str]:
    return [
        f"{name} #{i}: shape {list(v.shape)}, mean {float(np.mean(v)):.6g}, "
        f"max |x| {float(np.max(np.abs(v))):.6g}"
        for i, v in enumerate(values)
    ]


def run_on_gpu(module, seed: int, backend: str = "auto") -> int:
    """Compile, run on the GPU, compare with the interpreter; 0 when they match."""
    from mirage_xdsl.runtime import compile
    from mirage_xdsl.runtime.check import INPUT_AMPLITUDE, compare, run_poisoned

    a = INPUT_AMPLITUDE
    xs = random_inputs(module, seed, -a, a)
    start = time.perf_counter()
    compiled = compile(module, backend=backend)
    compile_seconds = time.perf_counter() - start
    outs = run_poisoned(compiled, xs, use_torch=False)
    refs = run(module, xs)
    result = compare(outs, refs)
    program = compiled.program
    print("\n".join(summarise("gpu output", outs)))
    print(
        f"compiled {len(program.launches)} launch(es) with {compiled.backend} in "
        f"{compile_seconds:.2f} s; "
        f"ran on {compiled.device.info.name}"
    )
    verdict = "match" if result.ok else "DIFFER"
    print(f"GPU against interpreter: {result.summary()} ({verdict})")
    compiled.close()
    return 0 if result.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mirage-run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input_file", help="program to run (.mlir)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--compare", metavar="REF", help="program to compare against")
    parser.add_argument(
        "--device",
        choices=("interpreter", "cuda"),
        default="interpreter",
        help="also run the compiled program on the GPU and compare (cuda)",
    )
    parser.add_argument(
        "--backend",
        choices=("auto", "triton", "cuda"),
        default="auto",
        help="code generator for --device cuda: Triton kernels (autotuned on the "
        "GPU), CUDA C through NVRTC, or auto (Triton where it is installed)",
    )
    parser.add_argument(
        "--amplitude",
        type=float,
        default=1.0,
        help="inputs are drawn uniformly from [-A, A] (default 1; lower it for "
        "programs whose exp() would overflow)",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    args = parser.parse_args(argv)
    try:
        module = load(args.input_file)
        if args.device == "cuda":
            return run_on_gpu(module, args.seed, args.backend)
        xs = random_inputs(module, args.seed, -args.amplitude, args.amplitude)
        start = time.perf_counter()
        outs = run(module, xs)
        seconds = time.perf_counter() - start
        print("\n".join(summarise("output", outs)))
        print(f"interpreted in {seconds:.3f} s")
        if args.compare:
            refs = run(load(args.compare), xs)
            if [r.shape for r in refs] != [o.shape for o in outs]:
                raise MirageError(f"{args.compare}: error: outputs differ in shape")
            err = max(
                float(np.linalg.norm(o - r) / max(np.linalg.norm(r), 1e-30))
                for o, r in zip(outs, refs, strict=True)
            )
            if not np.isfinite(err):
                raise MirageError(
                    f"{args.input_file}: error: outputs are not finite on these "
                    "inputs; try a smaller --amplitude"
                )
            verdict = "match" if err < 1e-3 else "DIFFER"
            print(f"relative difference to {args.compare}: {err:.3g} ({verdict})")
            return 0 if err < 1e-3 else 1
    except (MirageError, MemoryError, UnknownTarget) as e:
        if args.debug:
            raise
        if isinstance(e, MirageError):
            line = str(e)
        elif isinstance(e, MemoryError):
            line = "error: out of memory"
        else:  # a MIRAGE_GPU naming no target
            line = f"error: {error_line(e)}"
        print(line, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
