"""Which layouts may extend a prefix, and in what order (``Generator.items``).

Masked decode attention over 1024 keys (8 key heads of 64, 4 query rows per
head): a kernel that can neither finish the output nor write a partial sum
for a later one is not searched, nor one whose inputs cannot fit a block's
shared memory together; layouts that can finish the output come first, those
of more blocks ahead.
"""

from __future__ import annotations

import pytest

from mirage_xdsl.search import make_options
from mirage_xdsl.search.block_layout import Layout
from mirage_xdsl.search.generator import Generator
from mirage_xdsl.search.instantiate import most_blocks
from mirage_xdsl.search.task import Prefix
from mirage_xdsl.semantics.interpreter import entry_function

Q, K, MASK, V = range(4)


@pytest.fixture(scope="module")
def generator() -> Generator:
    from mirage_xdsl.ir.builder import new_kernel_graph

    g = new_kernel_graph("masked_decode")
    q = g.new_input((1, 8, 4, 64))
    k = g.new_input((1, 8, 64, 1024))
    mask = g.new_input((1, 1, 1, 1024))
    v = g.new_input((1, 8, 1024, 64))
    s = g.mul_scalar(g.matmul(q, k), 0.125)
    e = g.mul(g.exp(g.add(s, g.neg(g.reduce_max(s, 3)))), mask)
    g.mark_output(g.matmul(g.div(e, g.reduction(e, 3)), v))
    return Generator(entry_function(g.module()), make_options())


def _layouts(generator: Generator) -> list[Layout]:
    return [i for i in generator.items(Prefix()) if isinstance(i, Layout)]


def _axis_of(generator: Generator, arg: int, dim: int):
    return generator.axes.labels[generator.mini.body.block.args[arg]][dim]


def test_a_kernel_that_can_neither_finish_nor_feed_is_not_searched(generator):
    """Without the values a kernel cannot finish the output, so it must
    write partial sums: its grid splits the keys or the head dim (summed)."""
    summed = generator.axes.reduced | generator.axes.maxed
    without_v = [lay for lay in _layouts(generator) if V not in lay.sources]
    assert without_v
    assert all(any(t in summed for t in lay.grid) for lay in without_v)
    heads = _axis_of(generator, Q, 1)
    assert Layout((Q, K, MASK), (heads,), None) not in without_v


def test_a_block_holding_every_key_and_value_whole_is_not_searched(generator):
    """One block per key head with no loop holds 1024 keys and 1024 values
    of 64 (256 KB): more than a block's shared memory."""
    heads, rows = _axis_of(generator, Q, 1), _axis_of(generator, Q, 2)
    layouts = _layouts(generator)
    assert Layout((Q, K, MASK, V), (heads, rows), None) not in layouts
    keys = _axis_of(generator, K, 3)
    assert Layout((Q, K, MASK, V), (heads, rows), keys) in layouts


def test_layouts_that_finish_the_output_come_first_most_blocks_first(generator):
    layouts = _layouts(generator)
    finishing = [lay for lay in layouts if set(lay.sources) == {Q, K, MASK, V}]
    assert layouts[: len(finishing)] == finishing
    sizes = generator.full_axes.sizes
    blocks = [most_blocks(lay, sizes) for lay in finishing]
    assert blocks == sorted(blocks, reverse=True)
