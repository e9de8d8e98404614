"""``mirage-run``: execute a µGraph program on random inputs and summarise it.

The reference interpreter runs the program with the GPU's partition
semantics in fp32; ``--compare REF.mlir`` runs a second program on the same
inputs and reports the largest relative difference, so a rewritten program
can be checked against its source from the shell.
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

from mirage_xdsl.context import make_context
from mirage_xdsl.diagnostics import MirageError, parse, verify
from mirage_xdsl.interpreter import entry_function, run
from mirage_xdsl.workloads import random_inputs

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mirage-run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input_file", help="program to run (.mlir)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--compare", metavar="REF", help="program to compare against")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    args = parser.parse_args(argv)
    try:
        module = load(args.input_file)
        xs = random_inputs(module, args.seed)
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
            verdict = "match" if err < 1e-3 else "DIFFER"
            print(f"relative difference to {args.compare}: {err:.3g} ({verdict})")
            return 0 if err < 1e-3 else 1
    except (MirageError, MemoryError) as e:
        if args.debug:
            raise
        print(
            e if isinstance(e, MirageError) else "error: out of memory", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
