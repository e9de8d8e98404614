"""A complex product read back as real pairs is real arithmetic on the pairs.

Rotary embeddings written with complex numbers (Meta's Llama code and
torchtitan, transformers' Llama 4 and DeepSeek-V2) rotate each pair of
channels as one complex product:

    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    out = torch.view_as_real(x_ * freqs_cis).flatten(3)

mirage computes in real floats, so before partitioning each such product is
written out on the pairs, ``(a + bi)(c + di) = (ac - bd) + (ad + bc)i``: the
real and imaginary parts are the last dim's two elements (``aten.select``), and
the result is their ``aten.stack``. An operand that is a ``view_as_complex``
of a real tensor is read as that tensor; any other (the table of rotations,
computed from ``torch.polar``) through ``view_as_real``, a view that stays
torch with the complex ops that make it. Torch runs the rewritten graph where
mirage does not, with the same values (to float rounding).
"""

from __future__ import annotations

from typing import Any

from torch import fx

from mirage_xdsl.torch.nodes import aten, new_node

COMPLEX_PRODUCTS = (aten.mul.Tensor,)


def real_complex_products(graph: fx.Graph) -> int:
    """Rewrite each complex product all of whose uses are ``view_as_real``
    on real pairs; the number rewritten."""
    rewritten = 0
    for target in COMPLEX_PRODUCTS:
        for node in list(graph.find_nodes(op="call_function", target=target)):
            if _rewritable(node):
                _rewrite(graph, node)
                rewritten += 1
    return rewritten


def _is_complex(node: Any) -> bool:
    val = node.meta.get("val") if isinstance(node, fx.Node) else None
    return val is not None and val.is_complex()


def _rewritable(node: fx.Node) -> bool:
    a, b = node.args[:2] if len(node.args) >= 2 else (None, None)
    return (
        not node.kwargs
        and _is_complex(node)
        and _is_complex(a)
        and _is_complex(b)
        and all("val" in _pairs_of(z).meta for z in (a, b))
        and bool(node.users)
        and all(u.target == aten.view_as_real.default for u in node.users)
    )


def _pairs_of(z: fx.Node) -> fx.Node:
    """The node whose value the real pairs of ``z`` are read from."""
    if z.target == aten.view_as_complex.default and isinstance(z.args[0], fx.Node):
        return z.args[0]
    return z


def _rewrite(graph: fx.Graph, node: fx.Node) -> None:
    with graph.inserting_before(node):
        a, b = (_pairs(graph, x, node) for x in node.args[:2])
        ar, ai = _parts(graph, a, node)
        br, bi = _parts(graph, b, node)
        real = new_node(
            graph,
            aten.sub.Tensor,
            (_mul(graph, ar, br, node), _mul(graph, ai, bi, node)),
            node,
        )
        imag = new_node(
            graph,
            aten.add.Tensor,
            (_mul(graph, ar, bi, node), _mul(graph, ai, br, node)),
            node,
        )
        stacked = new_node(graph, aten.stack.default, ([real, imag], -1), node)
    operands = node.args[:2]
    for user in list(node.users):
        user.replace_all_uses_with(stacked)
        graph.erase_node(user)
    graph.erase_node(node)
    for z in operands:  # a view_as_complex only the product read
        if z.target == aten.view_as_complex.default and not z.users:
            graph.erase_node(z)


def _pairs(graph: fx.Graph, z: fx.Node, at: fx.Node) -> fx.Node:
    """The real tensor ``[..., 2]`` of complex ``z``."""
    pairs = _pairs_of(z)
    return (
        pairs
        if pairs is not z
        else new_node(graph, aten.view_as_real.default, (z,), at)
    )


def _parts(graph: fx.Graph, pairs: fx.Node, at: fx.Node) -> tuple[fx.Node, fx.Node]:
    return tuple(new_node(graph, aten.select.int, (pairs, -1, i), at) for i in (0, 1))


def _mul(graph: fx.Graph, x: fx.Node, y: fx.Node, at: fx.Node) -> fx.Node:
    return new_node(graph, aten.mul.Tensor, (x, y), at)
