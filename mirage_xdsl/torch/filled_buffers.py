"""A new buffer filled slice by slice is a concatenation of what was written.

DeepSeek's multi-head latent attention builds each head's key as

    k = kv.new_empty(*kv.shape[:-1], d_nope + d_rope)
    k[..., :d_nope].copy_(k_nope)
    k[..., d_nope:].copy_(k_rot)

In-place writes stay torch (``partition.Support``), and with them everything
that reads ``k``: the attention. Where the writes tile the new buffer along one
dim, each slice written once, before anything else reads the buffer, the buffer
is ``torch.cat`` of the written values (each broadcast to its slice, as
``copy_`` broadcasts, and cast to the buffer's dtype), which the capture
takes. Torch runs the rewritten graph where mirage does not, with the same
result: nothing else can see a buffer made by ``new_empty``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import fx

from mirage_xdsl.torch.nodes import aten, new_node

BUFFERS = (aten.new_empty.default, aten.empty.memory_format)
"""The ops that make a fresh, uninitialised buffer."""


@dataclass(frozen=True)
class _Write:
    start: int
    view: fx.Node
    """``aten.slice`` of the buffer."""
    copy: fx.Node
    """``aten.copy_`` into ``view``."""


def concat_filled_buffers(graph: fx.Graph) -> int:
    """Replace each buffer filled by slices with a ``torch.cat`` of the
    written values, after the last write; the number replaced."""
    replaced = 0
    for target in BUFFERS:
        for buf in list(graph.find_nodes(op="call_function", target=target)):
            order = {n: i for i, n in enumerate(graph.nodes)}  # as rewritten
            fill = _tiling(buf, order)
            if fill is not None:
                _replace(graph, buf, *fill, order)
                replaced += 1
    return replaced


def _tiling(buf: fx.Node, order: dict[fx.Node, int]) -> tuple[int, list[_Write]] | None:
    """The dim and the writes (by start) that tile ``buf`` before any other
    use of it; None if its uses are not of that form."""
    val = buf.meta.get("val")
    if val is None or not all(isinstance(d, int) for d in val.shape) or not val.ndim:
        return None
    writes, dims, others = [], set(), []
    for user in buf.users:
        write = _write(user, val.shape) if user.target == aten.slice.Tensor else None
        if write is None:
            if _writes_into(user):
                return None
            others.append(user)
            continue
        dims.add(write[0])
        writes.append(write[1])
    if len(dims) != 1 or len(writes) < 1:
        return None
    (dim,) = dims
    writes.sort(key=lambda w: w.start)
    end = 0
    for w in writes:
        if w.start != end:
            return None
        end += w.view.meta["val"].shape[dim]
    if end != val.shape[dim]:
        return None
    last = max(order[w.copy] for w in writes)
    if any(order[u] < last for u in others):
        return None
    return dim, writes


def _writes_into(node: fx.Node) -> bool:
    """Whether an op changes ``node`` in place, or a view of it."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return False
    if schema.arguments and (schema.arguments[0].alias_info or None) is not None:
        if schema.arguments[0].alias_info.is_write:
            return True
        return any(_writes_into(user) for user in node.users)
    return False


def _write(view: fx.Node, shape) -> tuple[int, _Write] | None:
    """``(dim, write)`` of a slice whose one use is a ``copy_`` into it."""
    args = list(view.args) + [None] * (5 - len(view.args))
    _, dim, start, _, step = args
    dim = (0 if dim is None else dim) % len(shape)
    if step not in (None, 1) or view.meta.get("val") is None:
        return None
    start = (
        0
        if start is None
        else max(0, min(start + shape[dim] * (start < 0), shape[dim]))
    )
    (copy, *more) = list(view.users) or [None]
    if (
        more
        or copy is None
        or copy.target != aten.copy_.default
        or copy.args[0] is not view
        or copy.users
        or not isinstance(copy.args[1], fx.Node)
    ):
        return None
    return dim, _Write(start, view, copy)


def _replace(
    graph: fx.Graph,
    buf: fx.Node,
    dim: int,
    writes: list[_Write],
    order: dict[fx.Node, int],
) -> None:
    val = buf.meta["val"]
    last = max((w.copy for w in writes), key=order.__getitem__)
    pieces = []
    with graph.inserting_before(last.next):
        for w in writes:
            src, shape = w.copy.args[1], list(w.view.meta["val"].shape)
            piece = src
            if list(src.meta["val"].shape) != shape:  # copy_ broadcasts
                piece = new_node(graph, aten.expand.default, (piece, shape), w.copy)
            if src.meta["val"].dtype != val.dtype:  # and casts
                piece = new_node(
                    graph, aten._to_copy.default, (piece,), w.copy, {"dtype": val.dtype}
                )
            pieces.append(piece)
        cat = new_node(graph, aten.cat.default, (pieces, dim), buf)
    views = {w.view for w in writes}
    buf.replace_all_uses_with(cat, delete_user_cb=lambda user: user not in views)
    for w in writes:
        graph.erase_node(w.copy)
        graph.erase_node(w.view)
    graph.erase_node(buf)
