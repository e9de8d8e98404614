"""The torch front end: capture torch code as kernel-dialect programs.

Importing this package imports torch (an optional dependency, ``pip install
mirage-xdsl[torch]``); ``import mirage_xdsl`` alone does not.

- :func:`capture` turns a function or ``nn.Module`` into a ``ModuleOp`` of
  kernel-dialect ops;
- :func:`superoptimize` captures, searches for a faster µGraph and returns a
  callable on torch tensors;
- ``torch.compile(fn, backend="mirage")`` does the same per captured graph and
  runs in eager mode whatever mirage cannot take.
"""

from mirage_xdsl.torch.capture import (
    ATEN_RULES,
    Captured,
    CaptureError,
    capture,
    capture_program,
)
from mirage_xdsl.torch.function import MirageFunction, superoptimize

__all__ = [
    "ATEN_RULES",
    "CaptureError",
    "Captured",
    "capture",
    "MirageFunction",
    "capture_program",
    "superoptimize",
]
