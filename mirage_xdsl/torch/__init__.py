"""The torch front end: capture torch code as kernel-dialect programs.

Importing this package imports torch (an optional dependency, ``pip install
mirage-xdsl[torch]``); ``import mirage_xdsl`` alone does not.

- :func:`capture` turns a function or ``nn.Module`` into a ``ModuleOp`` of
  kernel-dialect ops (conversion rules: :data:`ATEN_RULES`);
- :func:`superoptimize` captures, searches for a faster µGraph and returns a
  callable on torch tensors;
- ``torch.compile(fn, backend="mirage")`` partitions each graph Dynamo
  traces (:mod:`mirage_xdsl.torch.partition`): the parts mirage can take run
  as µGraphs, the rest (embedding lookups, integer index math, KV-cache
  writes) as torch between them;
- :func:`tensor_parallel` splits a module over several GPUs the Megatron way
  and captures the shard's program, with ``kernel.all_reduce`` between blocks;
  :func:`from_dtensor` takes a module already sharded with
  ``torch.distributed.tensor`` (DTensor) to the same program.
"""

from mirage_xdsl.torch.capture import Captured, capture, capture_program
from mirage_xdsl.torch.dtensor import DTensorParallel, from_dtensor
from mirage_xdsl.torch.function import MirageFunction, superoptimize
from mirage_xdsl.torch.nodes import CaptureError
from mirage_xdsl.torch.parallel import TensorParallel, tensor_parallel
from mirage_xdsl.torch.rules import ATEN_RULES

__all__ = [
    "ATEN_RULES",
    "CaptureError",
    "Captured",
    "DTensorParallel",
    "MirageFunction",
    "TensorParallel",
    "capture",
    "capture_program",
    "from_dtensor",
    "superoptimize",
    "tensor_parallel",
]
