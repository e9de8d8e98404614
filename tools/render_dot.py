"""Render the µGraphs of an MLIR file as a PNG or SVG picture (needs Graphviz).

    python tools/render_dot.py examples/gqa_flashdecoding.mlir -o gqa.png
    mirage-opt --superoptimize examples/gqa.mlir | python tools/render_dot.py - -o best.svg

The format comes from the output file's suffix (``.png``, ``.svg``, ``.dot``).
The DOT text is the same as ``mirage-opt -t dot`` prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import MirageError, parse, verify
from mirage_xdsl.ir.dot import FORMATS, render, to_dot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", help="MLIR file, or - for stdin")
    parser.add_argument("-o", "--output", required=True, help="out.png, .svg or .dot")
    args = parser.parse_args(argv)
    fmt = Path(args.output).suffix.lstrip(".")
    try:
        if fmt not in FORMATS:
            raise MirageError(
                f"{args.output}: error: unknown picture format '.{fmt}' "
                "(use .png, .svg or .dot)"
            )
        name = "<stdin>" if args.input == "-" else args.input
        text = sys.stdin.read() if args.input == "-" else Path(name).read_text()
        module = parse(make_context(), text, name)
        verify(module)
        dot = to_dot(module, Path(name).stem)
        data = dot.encode() if fmt == "dot" else render(dot, fmt)
    except (MirageError, OSError) as e:
        print(e if isinstance(e, MirageError) else f"error: {e}", file=sys.stderr)
        return 1
    Path(args.output).write_bytes(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
