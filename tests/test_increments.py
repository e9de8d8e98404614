"""In-place increments of graph inputs gathered into one ``_foreach_add_``
(``mirage_xdsl/torch/increments.py``), in the glue Inductor compiles."""

import pytest

torch = pytest.importorskip("torch")

from test_torch_backend import INTERPRET, spy_inductor  # noqa: E402

FOREACH = torch.ops.aten._foreach_add_.Scalar
ADDS = (torch.ops.aten.add_.Tensor, torch.ops.aten.add_.Scalar)


def two_layers_with_counters(x, w, cache0, cache1, count0, count1):
    """Two layers of a static cache: each reads its counter for the position
    it writes, then bumps it, as ``transformers``' ``StaticCache`` does."""
    h = torch.exp(x @ w)  # a µGraph
    cache0.index_copy_(0, count0.view(1), h)
    count0.add_(1)
    h = torch.sigmoid(cache0.sum(0, keepdim=True) @ w)  # a µGraph
    cache1.index_copy_(0, count1.view(1), h)
    count1.add_(1)
    return torch.tanh(cache1 @ w)  # a µGraph


def run(fn, steps=3):
    """Three steps of ``fn`` on fresh state; the outputs, caches and counters."""
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(1, 4, generator=g), torch.randn(4, 4, generator=g)
    state = [torch.zeros(5, 4), torch.zeros(5, 4)]
    counters = [torch.tensor(0), torch.tensor(1)]
    outs = [fn(x, w, *state, *counters) for _ in range(steps)]
    return outs, state, counters


def compiled(fn):
    options = {**INTERPRET, "glue": "inductor"}
    return torch.compile(fn, backend="mirage", options=options)


def targets(graph):
    return [n.target for n in graph.graph.nodes if n.op == "call_function"]


def test_two_counters_are_bumped_by_one_foreach_add(monkeypatch):
    """Both bumps become one ``_foreach_add_`` at the end of the glue, and
    the outputs, caches and counters after three steps equal torch's."""
    graphs = spy_inductor(monkeypatch)
    got = run(compiled(two_layers_with_counters))
    torch.testing.assert_close(got, run(two_layers_with_counters))
    (graph,) = graphs
    assert targets(graph).count(FOREACH) == 1
    assert not any(t in ADDS for t in targets(graph))
    (foreach,) = [n for n in graph.graph.nodes if n.target is FOREACH]
    assert len(foreach.args[0]) == 2 and foreach.next.op == "output"


def counters_graph(read_after: str = "") -> torch.fx.GraphModule:
    """Two int64 scalar inputs, each bumped in place by one (the first under
    a ``to`` that changes nothing); with ``read_after``, the first is read
    after its bump: ``"input"`` reads it, ``"view"`` a view of it made
    before the bump."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    graph = torch.fx.Graph()
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.tensor(0))
    a, b = graph.placeholder("a"), graph.placeholder("b")
    a.meta["val"] = b.meta["val"] = fake
    to = graph.call_function(torch.ops.aten.to.dtype, (a, torch.int64))
    to.meta["val"] = fake
    view = graph.call_function(torch.ops.aten.view.default, (a, [1]))
    before = graph.call_function(torch.ops.aten.mul.Tensor, (to, 2))
    graph.call_function(torch.ops.aten.add_.Tensor, (to, 1))
    graph.call_function(torch.ops.aten.add_.Tensor, (b, 1))
    if read_after:
        read = a if read_after == "input" else view
        before = graph.call_function(torch.ops.aten.mul.Tensor, (read, 2))
    graph.output((before,))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def test_bumps_nothing_reads_after_are_gathered_at_the_end():
    from mirage_xdsl.torch.increments import gather_increments

    gm = counters_graph()
    assert gather_increments(gm) == 2
    assert not any(t in ADDS for t in targets(gm))
    a, b = torch.tensor(3), torch.tensor(7)
    (out,) = gm(a, b)
    assert (int(out), int(a), int(b)) == (6, 4, 8)


@pytest.mark.parametrize("read", ["input", "view"])
def test_a_bump_whose_input_is_read_after_it_keeps_its_place(read):
    """Moved to the end, the first bump would come after the read that must
    see it, of the input or of a view made before the bump; one bump left
    alone is not gathered either."""
    from mirage_xdsl.torch.increments import gather_increments

    gm = counters_graph(read_after=read)
    assert gather_increments(gm) == 0
    assert sum(t in ADDS for t in targets(gm)) == 2
    (out,) = gm(torch.tensor(3), torch.tensor(7))
    assert out.tolist() in (8, [8])


def test_an_int_step_and_a_float_step_are_not_one_foreach():
    """``+1`` on two int64 counters is gathered; ``+1.0`` on a float tensor
    stays apart (1.0 cannot be added to an int64 tensor in place)."""
    from mirage_xdsl.torch.increments import gather_increments

    graph = torch.fx.Graph()
    nodes = [graph.placeholder(name) for name in "abc"]
    graph.call_function(torch.ops.aten.add_.Tensor, (nodes[0], 1))
    graph.call_function(torch.ops.aten.add_.Tensor, (nodes[1], 1.0))
    graph.call_function(torch.ops.aten.add_.Tensor, (nodes[2], 1))
    graph.output((None,))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    assert gather_increments(gm) == 2
    a, b, c = torch.tensor(3), torch.tensor(0.5), torch.tensor(7)
    gm(a, b, c)
    assert (int(a), float(b), int(c)) == (4, 1.5, 8)
