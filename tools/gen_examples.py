"""Regenerate ``examples/*.mlir`` from the workload registry.

Run from the project root: ``python tools/gen_examples.py``. A test checks the
files are in sync with the builders, so edit the builders, not the files.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mirage_xdsl.ir.printing import module_text
from mirage_xdsl.layers import build_transformer_layer
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS


def example_texts() -> dict[str, str]:
    """File name -> MLIR text for every example."""
    texts: dict[str, str] = {}
    for name, workload in WORKLOADS.items():
        for batch in (1, 8):
            suffix = "" if batch == 1 else f"_b{batch}"
            texts[f"{name}{suffix}.mlir"] = module_text(workload.module(batch))
    for name, (_, build) in HANDWRITTEN.items():
        texts[f"{name}.mlir"] = module_text(build(1))
    texts["transformer_layer.mlir"] = module_text(build_transformer_layer(1))
    return texts


def main() -> int:
    out = Path(__file__).resolve().parent.parent / "examples"
    for name, text in example_texts().items():
        (out / name).write_text(text)
        print(f"wrote examples/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
