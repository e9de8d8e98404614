"""Write every generated kernel source to a directory, one file per program and target.

Covers the examples (``examples/*.mlir``), every workload, hand-written and
algebraic µGraph of ``mirage_xdsl.workloads`` at b = 1 and 8, and random
µGraphs from the fuzzer (which use every element-wise op), each printed with
``-t triton`` and ``-t cuda``. Two runs of this script on two versions of the
code, then ``diff -r``, show whether a change altered any generated source:

    python tools/snapshot_codegen.py /tmp/before      # on the old commit
    python tools/snapshot_codegen.py /tmp/after       # on the new one
    diff -r /tmp/before /tmp/after

A program a target refuses gets a file holding the one-line reason, so a change
in what is refused shows up in the diff as well.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from mirage_xdsl.fuzz.programs import random_module
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.registry import ALL_TARGETS
from mirage_xdsl.workloads import ALGEBRAIC, HANDWRITTEN, WORKLOADS

TARGETS = ("triton", "cuda")
ROOT = Path(__file__).resolve().parent.parent


def programs(fuzz_seeds: int) -> dict[str, str]:
    """Program name -> MLIR text."""
    out: dict[str, str] = {}
    for path in sorted((ROOT / "examples").glob("*.mlir")):
        out[f"example_{path.stem}"] = path.read_text()
    builders = {name: w.build for name, w in WORKLOADS.items()}
    builders |= {name: b for name, (_, b) in (HANDWRITTEN | ALGEBRAIC).items()}
    for name, build in builders.items():
        for batch in (1, 8):
            out[f"{name}_b{batch}"] = str(build(batch))
    for seed in range(fuzz_seeds):
        rng = np.random.default_rng(seed)
        out[f"fuzz_{seed:03d}"] = str(random_module(rng, customized_prob=0.5))
    return out


def emit(text: str, target: str) -> str:
    ctx = make_context()
    try:
        module = Parser(ctx, text).parse_module()
        module.verify()
        assert isinstance(module, ModuleOp)
        buffer = io.StringIO()
        ALL_TARGETS[target]()().emit(ctx, module, buffer)
        return buffer.getvalue()
    except Exception as e:  # the reason is the snapshot of a refusal
        return (
            f"refused: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}\n"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="directory to write the sources to")
    parser.add_argument("--fuzz-seeds", type=int, default=60)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    count = 0
    for name, text in programs(args.fuzz_seeds).items():
        (args.out / f"{name}.mlir").write_text(text)
        for target in TARGETS:
            (args.out / f"{name}.{target}.txt").write_text(emit(text, target))
            count += 1
    print(f"{count} sources written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
