"""``torch.compile(backend="mirage")``: what it takes, and the eager fallback."""

import logging
import math
import re

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from torch.utils._pytree import tree_leaves  # noqa: E402

import mirage_xdsl  # noqa: E402
from mirage_xdsl.ir.diagnostics import MirageError  # noqa: E402
from mirage_xdsl.torch import superoptimize  # noqa: E402
from mirage_xdsl.torch.backend import mirage_backend  # noqa: E402
from mirage_xdsl.torch.workloads import example_inputs, gqa  # noqa: E402

INTERPRET = {"cpu": "interpret", "superoptimize": False}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    from mirage_xdsl.torch import backend

    torch._dynamo.reset()
    backend._SEARCHED.clear()
    yield
    torch._dynamo.reset()
    backend._SEARCHED.clear()


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(2, 8, generator=g) - 0.5, torch.rand(8, 8, generator=g) - 0.5


def attention_then_erf(x, w):
    p = torch.softmax(x @ w, dim=-1)
    torch._dynamo.graph_break()
    return torch.erf(p) + p


def test_backend_name_comes_from_the_entry_point():
    assert "mirage" in torch._dynamo.list_backends()


def mirage_log(caplog):
    return [r.message for r in caplog.records if r.name == "mirage_xdsl.torch"]


def erf_after_matmul(x, w):
    y = x @ w
    return torch.erf(y) * 2.0


def test_unsupported_op_stays_torch_between_ugraphs(caplog, monkeypatch):
    calls = count_ugraph_calls(monkeypatch)
    x, w = inputs()
    compiled = torch.compile(erf_after_matmul, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(x, w)
    torch.testing.assert_close(out, erf_after_matmul(x, w))
    assert calls == [1, 1]  # the matmul, then the product by 2
    log = mirage_log(caplog)
    assert any(m.endswith("2 ops as 2 µGraphs, 1 as torch") for m in log)
    (erf,) = [m for m in log if "torch  aten.erf" in m]
    line = line_of(erf_after_matmul, "torch.erf")
    assert f"{__file__}:{line} `return torch.erf(y) * 2.0`" in erf
    assert erf.endswith(": no kernel-dialect equivalent")


def count_ugraph_calls(monkeypatch):
    """A list that grows by one per µGraph call, one entry per compiled graph."""
    from mirage_xdsl.torch import part as partition

    calls = []
    forward = partition.MiragePart.forward

    def counted(self, *args):
        calls.append(1)
        return forward(self, *args)

    monkeypatch.setattr(partition.MiragePart, "forward", counted)
    return calls


def line_of(fn, text):
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_supported_graph_is_taken_and_the_rest_runs_eagerly(caplog):
    x, w = inputs(1)
    compiled = torch.compile(attention_then_erf, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(x, w)
    torch.testing.assert_close(out, attention_then_erf(x, w))
    log = mirage_log(caplog)
    assert any("ops as 1 µGraphs, 0 as torch" in m for m in log)
    assert any("torch  aten.erf" in m for m in log)


def test_cpu_graphs_run_eagerly_by_default(caplog):
    x, w = inputs(2)
    compiled = torch.compile(lambda x, w: torch.exp(x @ w), backend="mirage")
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x, w), torch.exp(x @ w))
    assert any("CPU graph" in m for m in mirage_log(caplog))


PROJECTION = torch.nn.Linear(8, 8)


def project_tokens(table, ids):
    return torch.relu(PROJECTION(table[ids + 1]))


def test_parameters_and_index_math_around_a_ugraph(caplog, monkeypatch):
    """A global nn.Module's parameters are µGraph inputs; the int64 gather
    stays torch, named as such."""
    calls = count_ugraph_calls(monkeypatch)
    table, ids = torch.randn(16, 8), torch.tensor([[3, 1, 4]])
    compiled = torch.compile(project_tokens, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(table, ids)
    with torch.no_grad():
        torch.testing.assert_close(out, project_tokens(table, ids))
    assert calls == [1]
    log = mirage_log(caplog)
    assert any("aten.linear" in m and "mirage_0" in m for m in log)
    assert any("torch  aten.index " in m and "no kernel-dialect" in m for m in log)
    assert any("torch  aten.add " in m and "a torch.int64 tensor" in m for m in log)


NORMED = torch.nn.Sequential(
    torch.nn.RMSNorm(8, eps=1e-5), torch.nn.Linear(8, 8), torch.nn.RMSNorm(8)
)


def test_rms_norm_weights_lifted_into_the_graph_are_ugraph_inputs(caplog):
    """``torch.compile`` passes ``nn.RMSNorm``'s weight as a graph input, as
    it does ``nn.Linear``'s: the norm multiplies by it inside the µGraph."""
    with torch.no_grad():
        NORMED[0].weight.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 8)
    compiled = torch.compile(NORMED, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), NORMED(x))
    log = mirage_log(caplog)
    assert any("ops as 1 µGraphs, 0 as torch" in m for m in log), log


def write_then_read(cache, x):
    cache.mul_(0.5)  # an in-place write: stays torch
    return torch.exp(cache) + x


def read_then_write(cache, x):
    y = torch.exp(cache)
    cache.mul_(0.5)
    return y + x


def read_a_view_then_write(cache, x):
    y = torch.exp(cache.view(-1))  # a view of the cache, read before the write
    cache.mul_(0.5)
    return y.view(4, 8) + x


@pytest.mark.parametrize(
    "fn", [write_then_read, read_then_write, read_a_view_then_write]
)
def test_in_place_writes_stay_torch_and_keep_their_order(fn, caplog):
    x = torch.randn(4, 8)
    cache, expected_cache = torch.randn(4, 8), None
    expected_cache = cache.clone()
    expected = fn(expected_cache, x)
    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(cache, x)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(cache, expected_cache)
    assert any("torch  aten.mul_" in m and "in-place" in m for m in mirage_log(caplog))


def test_backend_rejects_unknown_cpu_mode():
    gm = torch.fx.symbolic_trace(lambda x: x.exp())
    with pytest.raises(MirageError, match="backend option 'cpu'"):
        mirage_backend(gm, [torch.zeros(2)], options={"cpu": "gpu"})


def test_backend_rejects_an_unknown_option_before_tracing():
    """One line naming the option and what the backend takes, not a failed
    search per part."""
    gm = torch.fx.symbolic_trace(lambda x: x.exp())
    with pytest.raises(
        MirageError, match=r"unknown backend option\(s\) 'serch'.*budget"
    ):
        mirage_backend(gm, [torch.zeros(2)], options={"serch": {"budget": 10}})
    mirage_backend(gm, [torch.zeros(2)], options={"budget": 10, "cache_dir": "none"})


@pytest.mark.skipif(
    not hasattr(mirage_xdsl, "superoptimize"),
    reason="needs the search (mirage_xdsl.superoptimize)",
)
def test_superoptimize_gqa_agrees_with_torch_on_cpu():
    xs = example_inputs("gqa", batch=1, scale=16, seed=3)
    fn = superoptimize(gqa, xs)
    ref = gqa(*[x.float() for x in xs])
    torch.testing.assert_close(fn(*xs).float(), ref, rtol=2e-2, atol=2e-3)


@pytest.fixture
def searches(monkeypatch):
    """Each search the backend runs, as (module, options)."""
    from mirage_xdsl.torch import backend

    seen = []
    search = backend.search

    def recorded(module, **options):
        seen.append((module, options))
        return search(module, **options)

    monkeypatch.setattr(backend, "search", recorded)
    return seen


@pytest.mark.skipif(
    not hasattr(mirage_xdsl, "superoptimize"),
    reason="needs the search (mirage_xdsl.superoptimize)",
)
def test_search_options_reach_the_search(caplog, searches):
    x, w = inputs(3)
    options = {"cpu": "interpret", "budget": 2, "cache_dir": "none"}
    compiled = torch.compile(
        lambda x, w: torch.exp(x @ w), backend="mirage", options=options
    )
    torch.testing.assert_close(compiled(x, w), torch.exp(x @ w), rtol=1e-4, atol=1e-5)
    assert [{k: o[k] for k in ("budget", "cache_dir")} for _, o in searches] == [
        {"budget": 2, "cache_dir": "none"}
    ]


def test_parts_of_one_program_are_searched_once(caplog, searches):
    """Layers that compute the same (here, the same function on either side
    of a graph break) are one program, searched once and run by each part."""

    def layer(x, w):
        return torch.exp(x @ w)

    def two_layers(x, w1, w2):
        y = layer(x, w1)
        torch._dynamo.graph_break()
        return layer(y, w2)

    x, w1 = inputs(4)
    w2 = inputs(5)[1]
    options = {"cpu": "interpret", "budget": 1, "cache_dir": "none"}
    compiled = torch.compile(two_layers, backend="mirage", options=options)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(x, w1, w2)
    torch.testing.assert_close(out, two_layers(x, w1, w2), rtol=1e-4, atol=1e-5)
    assert len(searches) == 1
    assert any("searched already" in r.message for r in caplog.records)


def masked_attention(q, k, v, mask):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32], ids=str)
def test_masked_attention_matches_torch(mask_dtype, caplog):
    """A boolean mask (read as 0/1) multiplies, a float mask adds; the mask
    reaches the µGraph as an input from torch."""
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 2, 4, 8, generator=g) for _ in range(3))
    keep = torch.rand(1, 1, 4, 4, generator=g) < 0.6
    keep[..., 0] = True
    mask = keep if mask_dtype == torch.bool else torch.where(keep, 0.0, -1e9)
    compiled = torch.compile(masked_attention, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(q, k, v, mask)
    torch.testing.assert_close(
        out, masked_attention(q, k, v, mask), rtol=1e-5, atol=1e-5
    )
    assert any("ops as 1 µGraphs, 0 as torch" in m for m in mirage_log(caplog))


def test_a_part_whose_ugraph_fails_runs_as_torch_and_says_why(caplog, monkeypatch):
    from mirage_xdsl.torch import function

    def broken(self, *args):
        raise MirageError("error: no kernels today\nsecond line")

    monkeypatch.setattr(function.MirageFunction, "__call__", broken)
    x, w = inputs(5)
    compiled = torch.compile(erf_after_matmul, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x, w), erf_after_matmul(x, w))
        torch.testing.assert_close(compiled(x, w), erf_after_matmul(x, w))
    failed = [m for m in mirage_log(caplog) if "its µGraph failed" in m]
    assert len(failed) == 2  # once per part, on its first call only
    assert all(m.endswith("its µGraph failed: error: no kernels today") for m in failed)


def grouped_masked_attention(q, k, v, mask):
    return torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, enable_gqa=True
    )


@pytest.mark.parametrize("mask_shape", [(1, 1, 1, 6), (1, 1, 4, 6), (1, 4, 4, 6)])
def test_grouped_heads_with_masks_match_torch(mask_shape):
    """4 query heads over 2 key heads: a mask the same for every stacked row
    broadcasts as it is; one per row or per head reads the grouped view."""
    g = torch.Generator().manual_seed(6)
    q = torch.randn(1, 4, 4, 8, generator=g)
    k, v = torch.randn(1, 2, 6, 8, generator=g), torch.randn(1, 2, 6, 8, generator=g)
    mask = torch.rand(mask_shape, generator=g) < 0.6
    mask[..., 0] = True
    compiled = torch.compile(
        grouped_masked_attention, backend="mirage", options=INTERPRET
    )
    torch.testing.assert_close(
        compiled(q, k, v, mask),
        grouped_masked_attention(q, k, v, mask),
        rtol=1e-5,
        atol=1e-5,
    )


class Projections(torch.nn.Module):
    def __init__(self, bias: bool = False):
        super().__init__()
        self.q = torch.nn.Linear(16, 16, bias=bias)
        self.k = torch.nn.Linear(16, 8, bias=bias)
        self.v = torch.nn.Linear(16, 8, bias=bias)

    def forward(self, x):
        return torch.relu(self.q(x)), self.k(x) * 2.0, self.v(x)


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_sibling_linears_of_a_graph_are_one_matmul_of_their_joined_weights(
    monkeypatch, bias
):
    """The weights arrive as graph inputs: the part takes them stacked as
    one input of its own, copied once, and reads it transposed. Biases (Qwen2's
    q, k and v have them) arrive as inputs too, and are stacked the same way:
    one add after the one matmul."""
    from mirage_xdsl.torch import part as parts
    from mirage_xdsl.torch import partition

    made = []
    convert = parts.convert_graph

    def recorded(sub):
        made.append(convert(sub))
        return made[-1]

    monkeypatch.setattr(partition, "convert_graph", recorded)
    torch.manual_seed(0)
    model, x = Projections(bias), torch.randn(2, 3, 16)
    compiled = torch.compile(model, backend="mirage", options=INTERPRET)
    with torch.no_grad():
        got, want = compiled(x), model(x)
        again = compiled(x)  # the joined copy is kept, and still right
        model.k.bias.add_(1.0) if bias else model.k.weight.add_(1.0)
        changed, want_changed = compiled(x), model(x)  # joined again
    for g, a, w in zip(got, again, want, strict=True):
        torch.testing.assert_close(g, w)
        torch.testing.assert_close(a, w)
    for g, w in zip(changed, want_changed, strict=True):
        torch.testing.assert_close(g, w)
    ((captured, _, stacked),) = made
    text = str(captured.module)
    assert text.count("kernel.matmul") == 1 and len(stacked) == 1 + bias
    assert all(len(group) == 3 for group in stacked)  # q, k and v's, stacked
    assert "tensor<32x16xf32>" in text  # [sum of out, in], read transposed
    assert text.count("kernel.add") == bias
    assert ("tensor<32xf32>" in text) == bias


def test_functions_of_one_program_share_one_build(monkeypatch):
    """Each layer's MirageFunction of the same program text runs one compiled
    program; a different program gets its own."""
    from mirage_xdsl.torch import function

    builds = []
    monkeypatch.setattr(function, "_COMPILED", {})
    monkeypatch.setattr(
        mirage_xdsl,
        "compile",
        lambda module: builds.append(module) or object(),
        raising=False,
    )
    a = superoptimize(lambda x, w: torch.exp(x @ w), inputs(0), budget=0)
    b = superoptimize(lambda x, w: torch.exp(x @ w), inputs(1), budget=0)
    c = superoptimize(lambda x, w: torch.sqrt(x @ w), inputs(1), budget=0)
    first = function.compiled_program(a.module)
    assert function.compiled_program(b.module) is first
    assert function.compiled_program(c.module) is not first
    assert len(builds) == 2


def cache_write_between_ugraphs(x, w, cache, position, k):
    y = torch.exp(x @ w)  # a µGraph
    cache.index_copy_(0, position, y)  # torch, in place on a graph input
    return torch.softmax(cache @ k, dim=-1) * 2.0, position + 1  # a µGraph, torch


def cache_write_inputs(seed=7):
    g = torch.Generator().manual_seed(seed)
    x, w, k = (torch.randn(s, generator=g) for s in ((2, 3), (3, 4), (4, 5)))
    return x, w, torch.zeros(6, 4), torch.tensor([1, 3]), k


def cache_write_run(glue=None):
    """The outputs and the written cache of ``cache_write_between_ugraphs`` on
    fresh inputs: through the backend with ``glue``, or torch's (None)."""
    xs = cache_write_inputs()
    fn = cache_write_between_ugraphs
    if glue is not None:
        options = {**INTERPRET, "glue": glue}
        fn = torch.compile(fn, backend="mirage", options=options)
    return fn(*xs), xs[2]


def spy_inductor(monkeypatch):
    """The graphs the glue hands to Inductor."""
    from mirage_xdsl.torch import glue

    graphs = []
    compile_fx = glue.compile_fx

    def recorded(gm, example_inputs, combo=True):
        graphs.append(gm)
        return compile_fx(gm, example_inputs, combo)

    monkeypatch.setattr(glue, "compile_fx", recorded)
    return graphs


def test_glue_compiled_by_inductor_keeps_the_cache_write(monkeypatch):
    """The torch ops around two µGraphs go through Inductor, the µGraphs as
    opaque ops; outputs and the written cache equal eager glue's and torch's."""
    graphs, calls = spy_inductor(monkeypatch), count_ugraph_calls(monkeypatch)
    results = {}
    for glue in ("inductor", "eager"):
        torch._dynamo.reset()
        results[glue] = cache_write_run(glue)
    for glue in ("inductor", "eager"):
        torch.testing.assert_close(results[glue], cache_write_run())
    assert len(calls) == 4  # two µGraphs per call, with either glue
    (graph,) = graphs
    targets = [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]
    assert targets.count("mirage.part.default") == 2
    assert "aten.index_copy_.default" in targets


def test_a_failing_ugraph_in_inductor_glue_runs_as_torch(caplog, monkeypatch):
    from mirage_xdsl.torch import function

    def broken(self, *args):
        raise MirageError("error: no kernels today")

    monkeypatch.setattr(function.MirageFunction, "__call__", broken)
    graphs = spy_inductor(monkeypatch)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        got = cache_write_run("inductor")
    torch.testing.assert_close(got, cache_write_run())
    assert sum("its µGraph failed" in m for m in mirage_log(caplog)) == 2
    assert len(graphs) == 1


def test_a_failing_ugraph_runs_its_torch_ops_on_the_dtypes_they_take(
    caplog, monkeypatch
):
    """The Inductor glue converts a bool mask to the program's float before
    the part's op; the part's own torch ops, run when its µGraph fails,
    take it as the bool it was (as a float, SDPA would add the mask)."""
    from mirage_xdsl.torch import function

    def broken(self, *args):
        raise MirageError("error: no kernels today")

    monkeypatch.setattr(function.MirageFunction, "__call__", broken)
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 2, 4, 8, generator=g) for _ in range(3))
    mask = torch.rand(1, 1, 4, 4, generator=g) < 0.6
    mask[..., 0] = True
    options = {**INTERPRET, "glue": "inductor"}
    compiled = torch.compile(masked_attention, backend="mirage", options=options)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(q, k, v, mask)
    torch.testing.assert_close(out, masked_attention(q, k, v, mask))
    assert sum("its µGraph failed" in m for m in mirage_log(caplog)) == 1


def test_glue_inductor_cannot_compile_runs_eagerly(caplog, monkeypatch):
    from mirage_xdsl.torch import glue

    def refused(gm, example_inputs, combo=True):
        raise RuntimeError("no compiler\nsecond line")

    monkeypatch.setattr(glue, "compile_fx", refused)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        got = cache_write_run("inductor")
    torch.testing.assert_close(got, cache_write_run())
    (line,) = [m for m in mirage_log(caplog) if "Inductor" in m]
    assert line.endswith("glue runs eagerly: Inductor failed: no compiler")


def test_a_glue_graph_that_cannot_be_copied_is_built_once(monkeypatch):
    """A graph the retry cannot keep a copy of is built once, with combo
    kernels and its increments as they are; the results equal torch's."""
    import types

    from mirage_xdsl.torch import glue

    def uncopyable(x):
        raise TypeError("cannot copy")

    monkeypatch.setattr(glue, "copy", types.SimpleNamespace(deepcopy=uncopyable))
    graphs = spy_inductor(monkeypatch)
    torch.testing.assert_close(cache_write_run("inductor"), cache_write_run())
    assert len(graphs) == 1


def test_backend_rejects_unknown_glue():
    gm = torch.fx.symbolic_trace(lambda x: x.exp())
    with pytest.raises(MirageError, match="backend option 'glue'"):
        mirage_backend(gm, [torch.zeros(2)], options={"glue": "nvcc"})


def spy_part_input_dtypes(monkeypatch):
    """The dtypes of the inputs the parts get, as they get them."""
    from mirage_xdsl.torch import part as partition

    given = []
    arguments = partition.MiragePart.arguments

    def spied(self, inputs):
        given.extend(x.dtype for x in inputs)
        return arguments(self, inputs)

    monkeypatch.setattr(partition.MiragePart, "arguments", spied)
    return given


def around_a_write(fn, seed, second):
    """``fn`` on an fp16 ``x``, ``second`` (made from the same generator),
    a zeroed fp16 cache and two positions; its outputs and the cache."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(2, 4, generator=g).half()
    other = second(g)
    cache = torch.zeros(5, 4, dtype=torch.float16)
    return fn(x, other, cache, torch.tensor([0, 2])), cache


def scaled_twice_around_a_write(x, scale, cache, position):
    y = torch.exp(x * scale.to(x.dtype))  # a µGraph reading fp32 scale as fp16
    cache.index_copy_(0, position, y)  # torch, between the two
    return torch.sqrt(cache * scale.to(x.dtype)), scale.view(1, -1)  # a µGraph


def test_inductor_glue_converts_an_input_once_for_every_part(monkeypatch):
    """A part's fp32 input converted to its fp16 program is one conversion in
    the graph Inductor compiles, shared by both parts; the parts then get
    their program's dtype, and the results equal torch's."""
    graphs, given = spy_inductor(monkeypatch), spy_part_input_dtypes(monkeypatch)

    def run(fn):
        return around_a_write(fn, 3, lambda g: torch.rand(4, generator=g) + 0.5)

    options = {**INTERPRET, "glue": "inductor"}
    got = run(
        torch.compile(scaled_twice_around_a_write, backend="mirage", options=options)
    )
    torch.testing.assert_close(
        got, run(scaled_twice_around_a_write), rtol=2e-3, atol=2e-3
    )
    (graph,) = graphs
    casts = conversions(graph)
    assert len(casts) == 1 and casts[0].args[1] == torch.float16
    # read by two parts, it is the opaque conversion Inductor computes once
    assert casts[0].target is torch.ops.mirage.converted.default
    parts = [n for n in graph.graph.nodes if str(n.target) == "mirage.part.default"]
    assert len(parts) == 2 and all(casts[0] in p.args[1] for p in parts)
    assert set(given) == {torch.float16}


def conversions(graph):
    """The dtype conversions of a glue graph: Inductor's, and the opaque one."""
    kinds = (
        torch.ops.prims.convert_element_type.default,
        torch.ops.mirage.converted.default,
    )
    return [n for n in graph.graph.nodes if n.target in kinds]


def scaled_around_a_write(x, scale, cache, position):
    y = torch.exp(x * scale.to(x.dtype))  # a µGraph reading fp32 scale as fp16
    cache.index_copy_(0, position, y)  # torch, after it
    return torch.sqrt(cache + 1.0)  # a µGraph not reading scale


def test_inductor_glue_leaves_a_conversion_one_part_reads_to_inductor(monkeypatch):
    """A conversion only one part reads stays Inductor's, to be fused into the
    kernel that makes its input; the results equal torch's."""
    graphs = spy_inductor(monkeypatch)

    def run(fn):
        return around_a_write(fn, 5, lambda g: torch.rand(4, generator=g) + 0.5)

    options = {**INTERPRET, "glue": "inductor"}
    fn = scaled_around_a_write
    got = run(torch.compile(fn, backend="mirage", options=options))
    torch.testing.assert_close(got, run(fn), rtol=2e-3, atol=2e-3)
    (graph,) = graphs
    (cast,) = conversions(graph)
    assert cast.target is torch.ops.prims.convert_element_type.default


def test_inductor_compiles_the_glue_with_combo_kernels(monkeypatch):
    """Inductor builds the glue with combo kernels on (the small writes
    between two parts in one launch), and only the glue: the setting is
    Inductor's default again after."""
    import torch._inductor.compile_fx as inductor
    import torch._inductor.config as config

    seen = []
    compile_fx = inductor.compile_fx

    def recorded(gm, example_inputs, *args, **kwargs):
        seen.append(config.combo_kernels)
        return compile_fx(gm, example_inputs, *args, **kwargs)

    monkeypatch.setattr(inductor, "compile_fx", recorded)
    before = config.combo_kernels
    torch.testing.assert_close(cache_write_run("inductor"), cache_write_run())
    assert seen == [True] and config.combo_kernels == before


def test_glue_combo_kernels_failing_is_built_without_them(caplog, monkeypatch):
    """Where Inductor fails with combo kernels, the glue is built again
    without them (one line says so), not run eagerly."""
    import torch._inductor.compile_fx as inductor
    import torch._inductor.config as config

    seen = []
    compile_fx = inductor.compile_fx

    def combo_fails(gm, example_inputs, *args, **kwargs):
        seen.append(config.combo_kernels)
        if config.combo_kernels:
            raise RuntimeError("combo kernels broke\nsecond line")
        return compile_fx(gm, example_inputs, *args, **kwargs)

    monkeypatch.setattr(inductor, "compile_fx", combo_fails)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(cache_write_run("inductor"), cache_write_run())
    assert seen == [True, False]
    (line,) = [m for m in mirage_log(caplog) if "glue" in m]
    assert line.endswith("built as it is, without combo kernels: combo kernels broke")


def two_slices_around_a_write(x, w, cache, position):
    y = torch.exp(x @ w)  # a µGraph; its one row's slices are views of y
    a, b = y[..., :4], y[..., 4:]
    cache.index_copy_(0, position, b)
    return a, b, position + 1


def two_slices_run(fn):
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(1, 3, generator=g), torch.randn(3, 8, generator=g)
    cache = torch.zeros(5, 4)
    return fn(x, w, cache, torch.tensor([2])), cache


def two_slices_compiled():
    options = {"cpu": "interpret", "budget": 2, "glue": "inductor"}
    return torch.compile(two_slices_around_a_write, backend="mirage", options=options)


def test_inductor_glue_takes_two_slices_of_one_buffer_as_views(monkeypatch):
    """A searched part returns two slices of one result as views of its
    buffer; the op Inductor calls may not return aliases, so it returns the
    buffer once and the glue graph slices it. The results equal torch's."""
    graphs = spy_inductor(monkeypatch)
    got = two_slices_run(two_slices_compiled())
    torch.testing.assert_close(got, two_slices_run(two_slices_around_a_write))
    (graph,) = graphs
    nodes = list(graph.graph.nodes)
    (call,) = [n for n in nodes if str(n.target) == "mirage.part.default"]
    items = [n for n in nodes if n.args and n.args[0] is call]
    assert len(items) == 1  # the one buffer
    slices = [n for n in nodes if n.target is torch.ops.aten.slice.Tensor]
    assert len(slices) == 2 and all(n.args[0] is items[0] for n in slices)


def test_a_part_returning_one_buffer_falls_back_to_torch(caplog, monkeypatch):
    """A part whose op returns one buffer for two slices fills it from its
    torch ops when its µGraph fails."""
    from mirage_xdsl.torch import function

    def broken(self, *args):
        raise MirageError("error: no kernels today")

    monkeypatch.setattr(function.MirageFunction, "raw", broken)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        got = two_slices_run(two_slices_compiled())
    torch.testing.assert_close(got, two_slices_run(two_slices_around_a_write))
    assert sum("its µGraph failed" in m for m in mirage_log(caplog)) == 1


def masked_twice_around_a_write(x, mask, cache, position):
    m = mask.view(1, -1)
    y = torch.exp(x) * m.to(x.dtype)  # a µGraph; the view of its input goes on
    cache.index_copy_(0, position, y)  # torch, between the two
    return torch.sqrt(cache * m.to(x.dtype))  # a µGraph reading the view


def test_inductor_glue_converts_an_earlier_parts_output(monkeypatch):
    """An input a part reads from an earlier part's op (here a view of a
    boolean mask) is converted in the glue graph too: no part converts one.
    Both parts read the mask, the second through the view the first passes
    on; the graph converts it once (a decoder layer's parts each converted
    their model's one mask, a kernel per layer)."""
    graphs, given = spy_inductor(monkeypatch), spy_part_input_dtypes(monkeypatch)

    def run(fn):
        return around_a_write(fn, 4, lambda g: torch.rand(4, generator=g) > 0.3)

    options = {**INTERPRET, "glue": "inductor"}
    fn = masked_twice_around_a_write
    got = run(torch.compile(fn, backend="mirage", options=options))
    torch.testing.assert_close(got, run(fn), rtol=2e-3, atol=2e-3)
    assert given and set(given) == {torch.float16}
    (graph,) = graphs
    parts = [n for n in graph.graph.nodes if str(n.target) == "mirage.part.default"]
    assert len(parts) == 2 and len(conversions(graph)) == 1


def test_a_compiled_graph_gone_unregisters_its_parts():
    """The parts a compiled graph's ops call stay registered while the graph
    lives, and no longer."""
    import gc

    from mirage_xdsl.torch import glue

    before = set(glue._PARTS)
    got = cache_write_run("inductor")
    torch.testing.assert_close(got, cache_write_run())
    assert len(set(glue._PARTS) - before) == 2  # two µGraphs
    torch._dynamo.reset()
    gc.collect()
    assert set(glue._PARTS) <= before


def test_a_cpu_scalar_in_a_cuda_graph_stays_torch_and_the_rest_may_join():
    """A graph of CUDA tensors with a CPU scalar beside them (``generate``'s
    prefill graph has a CPU input) is a CUDA graph: the ops reading the
    scalar stay torch with the reason, the others may join a µGraph (the
    graph once counted as a CPU graph, and all of it ran as torch)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    from mirage_xdsl.torch.partition import Support

    def f(x, s):
        y = torch.exp(x * 2.0)
        return y + s

    with FakeTensorMode():
        x = torch.empty(4, 8, device="cuda")
        s = torch.empty((), device="cpu")
        gm = make_fx(f)(x, s)
    support = Support(gm.graph)
    reasons = {
        n.name: support.reason(n) for n in gm.graph.nodes if n.op == "call_function"
    }
    assert reasons["mul"] is None and reasons["exp"] is None
    assert reasons["add"] == "a tensor on cpu (the graph's µGraphs run on cuda)"


def test_a_graph_with_dynamic_shapes_is_built_per_shape_up_to_a_limit(
    caplog, monkeypatch
):
    """``dynamic=True``: each new row count is built as a graph of its own
    and kept; past the limit, further row counts run as torch, said once."""
    from mirage_xdsl.torch.backend import PerShape

    monkeypatch.setattr(PerShape, "LIMIT", 2)
    torch._dynamo.reset()

    def f(x):
        return torch.softmax(x * 2.0, dim=-1)

    compiled = torch.compile(
        f,
        backend="mirage",
        dynamic=True,
        options={"cpu": "interpret", "superoptimize": False},
    )
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        for rows in (3, 5, 3, 7, 9):
            x = torch.randn(rows, 16)
            torch.testing.assert_close(compiled(x), f(x))
    torch._dynamo.reset()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("has dynamic shapes" in m for m in messages) == 1
    assert sum(bool(re.search(r"ops as 1 µGraphs", m)) for m in messages) == 2
    over = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(over) == 1 and "more than 2 sets of shapes" in over[0].getMessage()


class GatedMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate, self.up = torch.nn.Linear(8, 16), torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


@pytest.mark.parametrize("glue", ["eager", "inductor"])
def test_a_training_step_gets_eagers_gradients_through_ugraphs(glue, monkeypatch):
    """A call that records gradients runs its µGraphs forward, and their
    backward runs each part again as torch: every weight and the input get
    eager's gradients (a µGraph's outputs alone have no grad_fn, so the
    loss's backward raised). Its glue runs eagerly, whatever the option
    says: Inductor's would call each part as an op without a backward."""
    from mirage_xdsl.torch import part

    ran = []
    mirage = part.MiragePart._mirage
    monkeypatch.setattr(
        part.MiragePart, "_mirage", lambda self, xs: ran.append(1) or mirage(self, xs)
    )
    torch.manual_seed(0)
    model = GatedMLP()
    x = torch.randn(4, 8, requires_grad=True)
    model(x).square().sum().backward()
    want = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    options = {**INTERPRET, "glue": glue}
    compiled = torch.compile(model, backend="mirage", options=options)
    compiled(x).square().sum().backward()
    assert ran
    got = [p.grad for p in model.parameters()] + [x.grad]
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def test_a_training_steps_output_may_be_written_in_place():
    """A part's output that is a view (of a program result, an input or a
    constant) is its own tensor when gradients are recorded, so the caller
    may write it in place (autograd refuses to for a custom function's
    view)."""
    torch.manual_seed(0)
    model = GatedMLP()
    x = torch.randn(4, 8, requires_grad=True)

    def scaled(x):
        return model(x).reshape(2, 2, 8)

    def step(fn):
        y = fn(x)
        y.mul_(2.0)
        y.sum().backward()
        grad = model.down.weight.grad.clone()
        model.zero_grad()
        return grad

    want = step(scaled)
    got = step(torch.compile(scaled, backend="mirage", options=INTERPRET))
    torch.testing.assert_close(got, want)


def checkpointed(x, w):
    return torch.utils.checkpoint.checkpoint(
        lambda a: torch.exp(a @ w), x, use_reentrant=False
    )


def test_a_graph_torch_export_refuses_names_its_higher_order_op(caplog):
    """Activation checkpointing is a higher-order op torch.export refuses
    with a bare name (``_checkpoint_context_fn``): the line says which op,
    at which line, and the graph runs as torch."""
    x, w = inputs(4)
    x.requires_grad_(True)
    compiled = torch.compile(checkpointed, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.WARNING, logger="mirage_xdsl.torch"):
        out = compiled(x, w)
    torch.testing.assert_close(out, torch.exp(x @ w))
    out.sum().backward()
    assert x.grad is not None
    (line,) = [m for m in mirage_log(caplog) if "torch.export refused it" in m]
    assert "it holds tag_activation_checkpoint at" in line
    assert f"{__file__}:{line_of(checkpointed, 'checkpoint(')}" in line


FLOAT_MIN = torch.finfo(torch.float32).min


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, m: torch.where(m, x, -1e4) * 2.0,
        lambda x, m: torch.where(m, 2.0, x * 3.0),
        lambda x, m: torch.where(~m, x, x * x),
        # DeBERTa's masked scores, then their softmax
        lambda x, m: torch.softmax(x.masked_fill(~m, FLOAT_MIN), dim=-1),
        lambda x, m: x.masked_fill(m.logical_not(), 0.0) + 1.0,
        # ModernBERT's q, k, v = qkv.unbind(dim=-3), a squeeze
        lambda x, m: (x * 2.0).view(2, 2, 2, 2).unbind(dim=-3)[1] + 1.0,
        lambda x, m: (x * 2.0).unsqueeze(1).squeeze(1) * m,
    ],
)
def test_selections_by_a_mask_and_unbinds_are_one_ugraph(fn, caplog):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 4, generator=g)
    m = torch.rand(4, 4, generator=g) < 0.5
    m[..., 0] = True
    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(x, m)
    torch.testing.assert_close(out, fn(x, m))
    assert any(
        re.search(r"ops as 1 µGraphs, 0 as torch", s) for s in mirage_log(caplog)
    )


def causal_scores(x):
    """nanoGPT's attention without SDPA: the masked scores filled with -inf,
    then their softmax."""
    t = x.shape[-2]
    causal = torch.tril(torch.ones(t, t)).view(1, t, t)
    att = (x @ x.transpose(-1, -2)) * 0.5
    return torch.softmax(att.masked_fill(causal == 0, float("-inf")), dim=-1)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, m: torch.softmax((x * 2.0).masked_fill(m, float("-inf")), dim=-1),
        lambda x, m: torch.softmax(torch.where(m, x * 2.0, float("-inf")), dim=-1),
        lambda x, m: torch.where(~m, x, -math.inf).softmax(-1) @ x,
    ],
)
def test_a_fill_of_minus_infinity_before_a_softmax_is_one_ugraph(fn, caplog):
    """The softmax weighs the filled entries 0: its exponentials times the
    0/1 mask, exact, as SDPA's mask is."""
    x, m = torch.randn(4, 4), ~torch.eye(4).bool()
    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x, m), fn(x, m))
    log = mirage_log(caplog)
    assert any("as 1 µGraphs, 0 as torch" in s for s in log), log


def test_a_causal_mask_filled_with_minus_infinity_is_in_the_ugraph(caplog):
    x = torch.randn(2, 5, 8)
    compiled = torch.compile(causal_scores, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x), causal_scores(x))
    log = mirage_log(caplog)
    assert any("mirage_0  aten.masked_fill" in s for s in log), log
    assert any("mirage_0  aten.softmax" in s for s in log), log


def test_an_infinite_fill_read_otherwise_stays_torch_and_says_why(caplog):
    def fill(x, m):
        return (x * 2.0).masked_fill(m, float("-inf")).exp() + 1.0

    x, m = torch.randn(4, 4), torch.eye(4).bool()
    compiled = torch.compile(fill, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x, m), fill(x, m))
    assert any(
        "torch  aten.masked_fill" in s
        and "a fill of -inf read by anything but a softmax" in s
        for s in mirage_log(caplog)
    )


@pytest.mark.parametrize(
    "fn",
    [
        # GPT-OSS's gated MLP clamps its gate above and its up both ways
        lambda x: (x * 2.0).clamp(min=-1.0, max=1.0) + x.clamp(max=0.5),
        lambda x: torch.clamp_min(x * 3.0, 0.25) * torch.clip(x, -2, 2),
        # a lower bound above the upper gives the upper, as in torch
        lambda x: x.clamp(min=1.0, max=-1.0) * x,
        # Bamba's step size: an upper bound of inf bounds nothing
        lambda x: torch.clamp(x * 2.0, min=0.0, max=float("inf")) + x,
        # DiffLlama's weights: a sum into fp32, then exp
        lambda x: torch.exp(torch.sum(x * x, dim=-1, dtype=torch.float32)),
    ],
)
def test_clamps_and_a_sum_into_fp32_are_one_ugraph(fn, caplog):
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(6))
    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        out = compiled(x)
    torch.testing.assert_close(out, fn(x))
    assert any(
        re.search(r"ops as 1 µGraphs, 0 as torch", s) for s in mirage_log(caplog)
    )


def test_a_clamp_by_a_tensor_stays_torch_and_says_why(caplog):
    def bounded(x, y):
        return (x * 2.0).clamp(min=y) + 1.0

    x, y = torch.randn(4, 4), torch.zeros(4, 4)
    compiled = torch.compile(bounded, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x, y), bounded(x, y))
    assert any("a clamp by a tensor bound" in s for s in mirage_log(caplog))


def test_an_op_on_an_empty_tensor_stays_torch_and_says_why(caplog):
    """A mixture of experts' linear over an expert that got no tokens (JetMoE
    splits its tokens by expert) reads a tensor of size 0: it stays torch,
    where the rest of the graph is still a µGraph."""

    def f(x, w):
        return torch.relu(x @ w) * 2.0, (w * 3.0).sum(0, keepdim=True)

    x, w = torch.randn(0, 4), torch.randn(4, 4)
    compiled = torch.compile(f, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        for got, want in zip(compiled(x, w), f(x, w), strict=True):
            torch.testing.assert_close(got, want)
    log = mirage_log(caplog)
    assert any(re.search(r"2 ops as 1 µGraphs, 3 as torch", s) for s in log)
    assert any("aten.matmul" in s and "an empty tensor" in s for s in log)


def test_multihead_attention_is_one_ugraph(caplog):
    """``nn.MultiheadAttention`` (its ``unflatten`` of the packed q/k/v a
    reshape) runs whole as one µGraph."""
    torch.manual_seed(0)
    mha, x = (
        torch.nn.MultiheadAttention(32, 4, batch_first=True).eval(),
        torch.randn(2, 5, 32),
    )
    compiled = torch.compile(mha, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"), torch.no_grad():
        torch.testing.assert_close(compiled(x, x, x)[0], mha(x, x, x)[0])
    assert any("as 1 µGraphs, 0 as torch" in s for s in mirage_log(caplog))


def test_an_encoder_layers_fast_path_says_how_to_see_its_parts(caplog):
    """Under ``no_grad`` ``nn.TransformerEncoderLayer`` is one fused native
    op: the log says so and how to turn it off, and with it off the layer
    is one µGraph."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    layer, x = layer.eval(), torch.randn(2, 5, 32)
    for fast in (True, False):
        caplog.clear()
        torch._dynamo.reset()
        torch.backends.mha.set_fastpath_enabled(fast)
        try:
            compiled = torch.compile(layer, backend="mirage", options=INTERPRET)
            with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
                with torch.no_grad():
                    torch.testing.assert_close(compiled(x), layer(x))
        finally:
            torch.backends.mha.set_fastpath_enabled(True)
        log = mirage_log(caplog)
        if fast:
            assert any("set_fastpath_enabled(False)" in s for s in log), log
        else:
            assert any("as 1 µGraphs, 0 as torch" in s for s in log), log


@pytest.mark.parametrize(
    "equation, shapes",
    [
        ("bhqd,bhkd->bhqk", [(1, 2, 5, 8), (1, 2, 7, 8)]),
        ("bhqk,bhkd->bhqd", [(1, 2, 5, 7), (1, 2, 7, 8)]),
        ("...d,de->...e", [(2, 3, 8), (8, 4)]),
        ("bnd,bmd->bnm", [(2, 3, 8), (2, 5, 8)]),
    ],
)
def test_einsum_is_its_matmul_in_a_ugraph(equation, shapes, caplog):
    """``torch.einsum`` is traced through torch's own decomposition
    (permutes, reshapes, a batched matmul), each op at the einsum's line."""
    g = torch.Generator().manual_seed(9)
    a, b = (torch.randn(s, generator=g) for s in shapes)

    def fn(a, b):
        return torch.einsum(equation, a, b) * 2.0

    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(a, b), fn(a, b))
    log = mirage_log(caplog)
    assert any("as 1 µGraphs, 0 as torch" in s for s in log), log
    assert any("aten.bmm" in s and "torch.einsum(equation" in s for s in log), log


class PatchEmbedding(torch.nn.Module):
    """A vision transformer's patch embedding: a convolution whose stride is
    its kernel, then the patches as a sequence."""

    def __init__(self, padding: int | str = 0, stride: int = 4):
        super().__init__()
        self.proj = torch.nn.Conv2d(3, 8, 4, stride=stride, padding=padding)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2) * 2.0


@pytest.mark.parametrize(
    "padding, size", [(0, 16), ("valid", 16), (0, 18)], ids=["0", "valid", "ragged"]
)
def test_a_patch_embedding_convolution_is_a_matmul_in_the_ugraph(padding, size, caplog):
    """Windows that tile the input (``ragged``: two rows and columns past the
    last patch, which the convolution does not read) are rows of a matmul."""
    torch.manual_seed(0)
    model, x = PatchEmbedding(padding), torch.randn(2, 3, size, size)
    compiled = torch.compile(model, backend="mirage", options=INTERPRET)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    log = mirage_log(caplog)
    assert any("as 1 µGraphs, 0 as torch" in s for s in log), log
    assert any(" aten.mm " in s and "self.proj(x)" in s for s in log), log


def test_an_overlapping_convolution_stays_torch(caplog):
    torch.manual_seed(0)
    model, x = PatchEmbedding(stride=2), torch.randn(2, 3, 16, 16)
    compiled = torch.compile(model, backend="mirage", options=INTERPRET)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x), model(x))
    log = mirage_log(caplog)
    assert any("torch  aten.conv2d" in s for s in log), log


def test_repeat_of_a_computed_tensor_is_an_expand(caplog):
    """``repeat`` tiles: each repeated dim is a new dim expanded in front of
    it, the pair merged after (SigLIP repeats its probe over the batch)."""
    g = torch.Generator().manual_seed(11)
    x, y = torch.randn(4, 5, generator=g), torch.randn(8, 15, generator=g)

    def fn(x, y):
        return (x * 2).repeat(2, 3) + y, (x + 1).repeat(3, 1, 1), x.repeat(1, 1) * 3

    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        for got, want in zip(compiled(x, y), fn(x, y), strict=True):
            torch.testing.assert_close(got, want)
    log = mirage_log(caplog)
    assert any("as 1 µGraphs, 0 as torch" in s for s in log), log


@pytest.mark.parametrize(
    "fn",
    [
        # F.normalize: the 2-norm, clamped below by eps, expanded, divided by
        lambda x, y: F.normalize(x, dim=-1) * 2.0 + y,
        lambda x, y: x / x.norm(dim=-1, keepdim=True) + y.norm(dim=(0, 1)),
        lambda x, y: F.log_softmax(x, dim=-1) + y,
        lambda x, y: F.hardtanh(x, -0.5, 0.5) + F.relu6(y * 4.0),
        lambda x, y: F.softplus(x * 30.0) * y,  # past its threshold too
        # poolers: Swin's to one, windows of 4
        lambda x, y: (
            F.adaptive_avg_pool1d(x * 2.0, 1) * y
            + F.adaptive_avg_pool1d(y, 4).sum(dim=-1, keepdim=True)
        ),
    ],
)
def test_norms_log_softmax_and_hardtanh_are_one_ugraph(fn, caplog):
    g = torch.Generator().manual_seed(10)
    x, y = torch.randn(4, 16, generator=g), torch.randn(4, 16, generator=g)
    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x, y), fn(x, y))
    log = mirage_log(caplog)
    assert any("as 1 µGraphs, 0 as torch" in s for s in log), log


@pytest.mark.parametrize(
    "fn",
    [
        # a LayerNorm written with var: (x - mean) / sqrt(var + eps)
        lambda x: (
            (x - x.mean(-1, keepdim=True))
            / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5)
        ),
        lambda x: x.var(dim=(0, 1)) + x.std(-1, keepdim=True),
    ],
)
def test_variances_are_one_ugraph(fn, caplog):
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(11))
    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x), fn(x))
    assert any("as 1 µGraphs, 0 as torch" in s for s in mirage_log(caplog))


def test_ops_inside_torch_vmap_stay_torch_and_the_rest_are_mugraphs(caplog):
    """Dynamo keeps ``torch.vmap`` as ops that add and remove a batch dim
    (Mamba's reference scan is one): what reads a batched tensor stays torch
    with its reason, and a part whose call lands after the vmap (``h`` feeds
    both) does not carry the vmap's ops out of it."""

    def fn(x, y):
        h = x * 2.0
        z = torch.vmap(lambda a, b: a * b + 1.0)(h, y)
        return torch.relu(z) * h + y

    def late(x, y):  # one part of h and h + y, its call after the vmap
        h = x * 2.0
        z = torch.vmap(lambda a: a * 3.0)(h)
        return z, h + y

    g = torch.Generator().manual_seed(12)
    x, y = torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        for f in (fn, late):
            compiled = torch.compile(f, backend="mirage", options=INTERPRET)
            got, want = tree_leaves(compiled(x, y)), tree_leaves(f(x, y))
            for a, b in zip(got, want, strict=True):
                torch.testing.assert_close(a, b)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    log = mirage_log(caplog)
    assert any(
        "torch  aten.mul" in s and "inside torch.vmap (it reads a batched tensor)" in s
        for s in log
    ), log
    assert any("torch._functorch.predispatch._add_batch_dim" in s for s in log), log
    assert any(re.search(r"ops as [1-9] µGraphs", s) for s in log), log


def test_softplus_with_another_beta_stays_torch(caplog):
    def fn(x):
        return F.softplus(x, beta=2.0) * 3.0

    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(13))
    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x), fn(x))
    log = mirage_log(caplog)
    assert any("softplus with beta=2.0 (only beta=1)" in s for s in log), log


class ScaledByHalfBuffer(torch.nn.Module):
    """An fp32 model that scales by a bf16 buffer (RecurrentGemma's
    ``normalizer``) and by a 16-bit table of a few values."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor(8.0, dtype=torch.bfloat16))
        self.register_buffer("table", torch.rand(16, dtype=torch.float16))
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = x * self.scale.type(x.dtype) + self.table.float()
        return self.proj(h) * 1.1


def test_a_part_computes_in_the_dtype_most_of_its_input_is_in(monkeypatch):
    """A part of an fp32 model that reads 16-bit buffers computes in fp32:
    its program dtype is the float dtype of most of its input elements."""
    from mirage_xdsl.torch import part as parts
    from mirage_xdsl.torch import partition

    made = []
    convert = parts.convert_graph
    monkeypatch.setattr(
        partition, "convert_graph", lambda sub: made.append(convert(sub)) or made[-1]
    )
    torch.manual_seed(0)
    model, x = ScaledByHalfBuffer().eval(), torch.randn(4, 16) * 100
    compiled = torch.compile(model, backend="mirage", options=INTERPRET)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-6, atol=1e-4)
    ((captured, _, _),) = made
    text = str(captured.module)
    assert "xf32>" in text and "bf16" not in text and "xf16" not in text


def test_dump_dir_writes_each_parts_program_for_mirage_opt(tmp_path, caplog):
    """Each µGraph's program, as captured and as searched, is a file that
    ``mirage-opt`` reads; a second part computing the same is the same
    file; the directory is made where missing."""
    from mirage_xdsl.ir.context import make_context
    from mirage_xdsl.ir.diagnostics import parse

    def fn(x, w):
        return torch.relu(x @ w) * 2.0, torch.relu(w @ x) * 2.0

    x, w = torch.randn(8, 8), torch.randn(8, 8)
    out = tmp_path / "parts" / "here"
    options = {"cpu": "interpret", "budget": 1, "jobs": 1, "cache_dir": "none"}
    compiled = torch.compile(fn, backend="mirage", options={**options, "dump_dir": out})
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        for got, want in zip(compiled(x, w), fn(x, w), strict=True):
            torch.testing.assert_close(got, want)
    files = sorted(p.name for p in out.iterdir())
    names = {f.split(".")[0] for f in files}
    assert files == sorted(
        [f"{n}.mlir" for n in names] + [f"{n}.searched.mlir" for n in names]
    ), files
    for f in out.iterdir():
        module = parse(make_context(), f.read_text(), str(f))
        assert any(op.name.startswith("kernel.") for op in module.walk())
    assert any("written to" in s and str(out) in s for s in mirage_log(caplog))


def test_a_dump_dir_that_cannot_be_made_is_one_warning(tmp_path, caplog, monkeypatch):
    """The directory may come from ``MIRAGE_DUMP_DIR`` too."""
    from mirage_xdsl.torch.dump import ENV

    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    compiled = torch.compile(
        lambda x: torch.relu(x) * 2.0,
        backend="mirage",
        options=INTERPRET,
    )
    monkeypatch.setenv(ENV, str(blocker / "sub"))
    x = torch.randn(4, 4)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x), torch.relu(x) * 2.0)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "cannot write" in warnings[0], warnings
    assert blocker.read_text() == "not a directory"


@pytest.mark.parametrize(
    "conv",
    [
        lambda: torch.nn.Conv1d(4, 6, 3, padding=1),  # Whisper's first
        lambda: torch.nn.Conv1d(4, 6, 3, stride=2, padding=1),  # and second
        lambda: torch.nn.Conv1d(4, 4, 4, padding=3, groups=4),  # Mamba's, causal
        lambda: torch.nn.Conv1d(4, 4, 3, padding="same", groups=4, dilation=2),
        lambda: torch.nn.Conv1d(4, 6, 3, padding="valid", bias=False),
    ],
    ids=["padded", "strided", "depthwise", "same_dilated", "valid"],
)
def test_a_1d_convolution_is_shifted_reads_and_a_matmul(conv, caplog):
    torch.manual_seed(0)
    model, x = conv().eval(), torch.randn(2, 4, 9)

    def fn(x):
        return model(x * 1.5)[..., :9] * 2.0

    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-5)
    log = mirage_log(caplog)
    assert any("as 1 µGraphs, 0 as torch" in s for s in log), log


def test_a_grouped_convolution_stays_torch(caplog):
    torch.manual_seed(0)
    model, x = torch.nn.Conv1d(4, 6, 2, groups=2).eval(), torch.randn(2, 4, 8)
    compiled = torch.compile(
        lambda x: model(x) * 2.0, backend="mirage", options=INTERPRET
    )
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x), model(x) * 2.0)
    assert any("torch  aten.conv1d" in s for s in mirage_log(caplog))


def test_constant_pads_are_one_ugraph_and_other_modes_say_why(caplog):
    """``F.pad`` with a constant (a negative pad crops), and
    ``nn.ZeroPad2d`` (RWKV's time shift) are blocks of the constant
    concatenated; a reflecting pad stays torch with its reason."""

    def fn(x):
        a = F.pad(x * 2.0, (1, 2, 0, 3), value=0.5) + 1.0
        b = F.pad(x + 1.0, (-1, 2)) * 3.0
        return a, b, torch.nn.ZeroPad2d((0, 0, 1, -1))(x) * x

    x = torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(14))
    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        for got, want in zip(compiled(x), fn(x), strict=True):
            torch.testing.assert_close(got, want)
    assert any("as 1 µGraphs, 0 as torch" in s for s in mirage_log(caplog))

    def reflect(x):
        return F.pad(x * 2.0, (1, 1), mode="reflect") + 1.0

    caplog.clear()
    compiled = torch.compile(reflect, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x), reflect(x))
    assert any("a pad in mode 'reflect'" in s for s in mirage_log(caplog)), mirage_log(
        caplog
    )


@pytest.mark.parametrize(
    "fn",
    [
        torch.abs,
        lambda x: F.leaky_relu(x, 0.2),
        F.hardswish,  # MobileNet's
        F.hardsigmoid,
        F.elu,
        lambda x: F.elu(x, 0.5),
        F.selu,
        lambda x: F.celu(x, 2.0),
        F.mish,  # YOLO's
        F.logsigmoid,
        F.softsign,  # x / (1 + |x|)
        torch.exp2,
        lambda x: F.glu(x, dim=-1),
        lambda x: torch.lerp(x, x * x, 0.3),
        lambda x: torch.lerp(x, -x, torch.sigmoid(x)),
        lambda x: torch.addcmul(x, x, torch.tanh(x), value=0.5),
        lambda x: torch.logsumexp(x, dim=-1, keepdim=True),
        lambda x: torch.logsumexp(x.reshape(4, 8, 8), dim=(1, 2)).reshape(4, 1),
        lambda x: 2.0 / (x.abs() + 1.0) + torch.reciprocal(x * x + 0.5),
        lambda x: torch.rsqrt(x * x + 1.0),  # outside an RMSNorm
    ],
    ids=[
        "abs",
        "leaky_relu",
        "hardswish",
        "hardsigmoid",
        "elu",
        "elu_alpha",
        "selu",
        "celu",
        "mish",
        "logsigmoid",
        "softsign",
        "exp2",
        "glu",
        "lerp",
        "lerp_tensor",
        "addcmul",
        "logsumexp",
        "logsumexp_dims",
        "reciprocal",
        "rsqrt",
    ],
)
def test_activations_without_an_op_of_their_own_are_one_ugraph(fn, caplog):
    """And the other element-wise forms written in the table's ops (lerp,
    addcmul), and logsumexp with its shift."""

    def model(x):
        y = fn(x * 1.5)
        return y + x if y.shape == x.shape else y * 2.0

    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(15)) * 4
    compiled = torch.compile(model, backend="mirage", options=INTERPRET)
    with caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    log = mirage_log(caplog)
    assert any("as 1 µGraphs, 0 as torch" in s for s in log), log


def test_group_norm_and_cosine_similarity_are_one_ugraph(caplog):
    """``nn.GroupNorm`` (diffusion and vision models) with its weight and
    bias, over ``[N, C, H, W]``; ``F.cosine_similarity`` as torch computes it."""
    torch.manual_seed(0)
    norm = torch.nn.GroupNorm(2, 8).eval()
    with torch.no_grad():
        norm.weight.normal_(), norm.bias.normal_()

    def fn(x, y):
        return norm(x * 2.0) + 1.0, F.cosine_similarity(x, y, dim=1) * 3.0

    g = torch.Generator().manual_seed(16)
    x, y = torch.randn(2, 8, 3, 4, generator=g), torch.randn(2, 8, 3, 4, generator=g)
    compiled = torch.compile(fn, backend="mirage", options=INTERPRET)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="mirage_xdsl.torch"):
        for got, want in zip(compiled(x, y), fn(x, y), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    log = mirage_log(caplog)
    assert any("as 1 µGraphs, 0 as torch" in s for s in log), log
