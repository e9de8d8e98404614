"""Facts about ATen graph nodes that conversion rules need, and the capture error.

Every refusal goes through :func:`unsupported`, so each one is a single line
naming the torch op and the user's source line.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx
from xdsl.ir import Attribute

from mirage_xdsl.ir.builder import bfloat16, float16, float32
from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.torch.trace import caller_location, model_location, source_location

aten = torch.ops.aten

DTYPES: dict[torch.dtype, Attribute] = {
    torch.float16: float16,
    torch.bfloat16: bfloat16,
    torch.float32: float32,
}


def torch_dtype(dtype: Attribute) -> torch.dtype:
    """The torch dtype of a kernel-dialect element type."""
    return next(t for t, a in DTYPES.items() if a == dtype)


class CaptureError(MirageError):
    """Torch code that has no kernel-dialect equivalent; one located line.

    ``node`` is the refused graph node, when there is one, and ``reason`` the
    message without its location (the backend's account lists both)."""

    def __init__(self, message: str, node: fx.Node | None = None, reason: str = ""):
        super().__init__(message)
        self.node = node
        self.reason = reason or message


RMS_NORM_FORMS = (
    "an RMSNorm over the last dim: x * rsqrt(mean(x^2)) or x / sqrt(mean(x^2))"
)


def op_name(node: fx.Node) -> str:
    """``aten.mul``; a Python function by its qualified name
    (``torch._functorch.predispatch._add_batch_dim``), not its repr."""
    target = node.target
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        return f"aten.{packet.__name__}"
    if callable(target) and hasattr(target, "__qualname__"):
        return f"{getattr(target, '__module__', None) or '?'}.{target.__qualname__}"
    return str(target)


def unsupported(node: fx.Node, why: str) -> CaptureError:
    """``file:line:col: error: torch op 'aten.X' ...: why (in `source`)``.

    The location is the user's line that made the op; when the op comes from
    library code (a transformers model), it is the user's call into mirage,
    and the library's line is named in the parentheses."""
    return CaptureError(
        f"{where_prefix(node)}error: torch op '{op_name(node)}' is not supported: "
        f"{why}{source_suffix(node)}",
        node,
        why,
    )


def where_prefix(node: fx.Node | None) -> str:
    """``file:line:col: `` of the user's line for ``node``, else of the user's
    call into mirage; empty when neither is known."""
    loc = (source_location(node) if node is not None else None) or caller_location()
    return f"{loc}: " if loc else ""


def source_suffix(node: fx.Node) -> str:
    """`` (in `source`)`` of the user's line, followed by ``, at
    package/file.py:LINE: `source``` of the library line inside it that made
    the op; `` (in `source` at package/file.py:LINE)`` when the op comes from
    library code alone."""
    user, model = source_location(node), model_location(node)
    library = f"at {model.short()}: `{model.text}`" if model and model != user else ""
    if user is None:
        return f" (in `{model.text}` at {model.short()})" if model else ""
    text = f"in `{user.text}`" if user.text else ""
    return f" ({', '.join(p for p in (text, library) if p)})" if text or library else ""


def node_meta(node: fx.Node) -> torch.Tensor:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        raise unsupported(node, "its value is not a tensor")
    return val


def traced_dtype(node: fx.Node) -> torch.dtype | None:
    """The dtype of the tensor ``node`` makes, None where it has no tensor
    metadata."""
    val = node.meta.get("val")
    return val.dtype if isinstance(val, torch.Tensor) else None


def node_shape(node: fx.Node) -> tuple[int, ...]:
    shape = node_meta(node).shape
    if not all(isinstance(d, int) for d in shape):
        raise unsupported(node, "its shape is dynamic; capture static shapes")
    return tuple(shape)


def node_dtype(node: fx.Node) -> Attribute:
    dtype = node_meta(node).dtype
    if dtype not in DTYPES:
        raise unsupported(node, f"dtype {dtype} (mirage supports f16, bf16, f32)")
    return DTYPES[dtype]


def listed_dims(dims: Any) -> list[int]:
    """Dims as torch passes them (one int, a list, or None for none), listed."""
    if dims is None:
        return []
    return [dims] if isinstance(dims, int) else list(dims)


def reduced_dims(dims: Any, rank: int) -> list[int]:
    """:func:`listed_dims`, each once, counted from the front, in order."""
    return sorted({d % rank for d in listed_dims(dims)})


def last_dim_only(node: fx.Node, dims: Any, rank: int) -> bool:
    return [d % rank for d in listed_dims(dims)] == [rank - 1]


def new_node(
    graph: fx.Graph,
    target: Any,
    args: tuple[Any, ...],
    at: fx.Node,
    kwargs: dict[str, Any] | None = None,
) -> fx.Node:
    """A node of ``target`` at the graph's insertion point, for a rewrite
    before capture: its value what torch's fake tensors give, its metadata
    (the source location the log names) ``at``'s."""
    node = graph.call_function(target, args, kwargs or {})
    vals = fx.node.map_arg((args, kwargs or {}), lambda n: n.meta["val"])
    node.meta = {**at.meta, "val": target(*vals[0], **vals[1])}
    return node
