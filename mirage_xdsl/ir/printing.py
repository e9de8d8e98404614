"""Module text exactly as ``mirage-opt`` prints it, so files round-trip."""

from io import StringIO

from xdsl.dialects.builtin import ModuleOp
from xdsl.targets.mlir import MLIRTarget

from mirage_xdsl.ir.context import make_context


def module_text(module: ModuleOp) -> str:
    out = StringIO()
    MLIRTarget().emit(make_context(), module, out)
    return out.getvalue()
