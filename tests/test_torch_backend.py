"""``torch.compile(backend="mirage")``: what it takes, and the eager fallback."""

import logging

import pytest

torch = pytest.importorskip("torch")

import mirage_xdsl  # noqa: E402
from mirage_xdsl.ir.diagnostics import MirageError  # noqa: E402
from mirage_xdsl.torch import superoptimize  # noqa: E402
from mirage_xdsl.torch.backend import mirage_backend  # noqa: E402
from mirage_xdsl.torch.workloads import example_inputs, gqa  # noqa: E402

INTERPRET = {"cpu": "interpret", "superoptimize": False}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(2, 8, generator=g) - 0.5, torch.rand(8, 8, generator=g) - 0.5


def attention_then_erf(x, w):
    p = torch.softmax(x @ w, dim=-1)
    torch._dynamo.graph_break()
    return torch.erf(p) + p


def test_backend_name_comes_from_the_entry_point():
    assert "mirage" in torch._dynamo.list_backends()


def test_unsupported_graph_falls_back_to_eager(caplog):
    x, w = inputs()
    compiled = torch.compile(lambda x, w: torch.erf(x @ w), backend="mirage")
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(x, w)
    torch.testing.assert_close(out, torch.erf(x @ w))
    (record,) = [r for r in caplog.records if r.name == "mirage_xdsl.torch"]
    assert "running a graph eagerly" in record.message
    assert "torch op 'aten.erf' is not supported" in record.message


def test_supported_graph_is_taken_and_the_rest_runs_eagerly(caplog):
    x, w = inputs(1)
    compiled = torch.compile(attention_then_erf, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(x, w)
    torch.testing.assert_close(out, attention_then_erf(x, w))
    messages = [r.message for r in caplog.records if r.name == "mirage_xdsl.torch"]
    assert any("took a graph" in m for m in messages)
    assert any("aten.erf" in m for m in messages)


def test_cpu_graphs_run_eagerly_by_default(caplog):
    x, w = inputs(2)
    compiled = torch.compile(lambda x, w: torch.exp(x @ w), backend="mirage")
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x, w), torch.exp(x @ w))
    assert any("CPU graph eagerly" in r.message for r in caplog.records)


def test_backend_rejects_unknown_cpu_mode():
    gm = torch.fx.symbolic_trace(lambda x: x.exp())
    with pytest.raises(MirageError, match="backend option 'cpu'"):
        mirage_backend(gm, [torch.zeros(2)], options={"cpu": "gpu"})


@pytest.mark.skipif(
    not hasattr(mirage_xdsl, "superoptimize"),
    reason="needs the search (mirage_xdsl.superoptimize)",
)
def test_superoptimize_gqa_agrees_with_torch_on_cpu():
    xs = example_inputs("gqa", batch=1, scale=16, seed=3)
    fn = superoptimize(gqa, xs)
    ref = gqa(*[x.float() for x in xs])
    torch.testing.assert_close(fn(*xs).float(), ref, rtol=2e-2, atol=2e-3)
