"""The ``dot`` target: DOT text for every example, rendering, and its errors."""

import re
import shutil
from io import StringIO

import pytest

from mirage_xdsl.ir import dot
from mirage_xdsl.ir.context import make_context
from mirage_xdsl.ir.diagnostics import MirageError
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS


def modules():
    for name, w in WORKLOADS.items():
        yield name, w.module(1, 8)
    for name, (_, build) in HANDWRITTEN.items():
        yield name, build(1, 4)


@pytest.mark.parametrize("name, module", list(modules()), ids=lambda x: str(x)[:30])
def test_every_op_is_a_node_and_every_operand_an_edge(name, module):
    text = dot.to_dot(module, name)
    nodes = re.findall(r"^\s*(n\d+) \[label=", text, re.M)
    edges = re.findall(r"^\s*(n\d+) -> (n\d+);", text, re.M)
    ops = [op for op in module.walk() if not op.regions and op.name != "func.return"]
    args = [a for op in module.walk() for r in op.regions for a in r.block.args]
    returns = [
        v for op in module.walk() if op.name == "func.return" for v in op.operands
    ]
    assert len(nodes) == len(set(nodes)) == len(ops) + len(args) + len(returns)
    assert {n for e in edges for n in e} <= set(nodes)
    region_operands = sum(
        len(op.operands)
        for op in module.walk()
        if op.regions and op.name != "func.func"
    )
    plain_operands = sum(len(op.operands) for op in ops)
    assert len(edges) == plain_operands + region_operands + len(returns)


def test_customized_cluster_shows_grid_and_forloop():
    _, build = HANDWRITTEN["rmsnorm_linear_fused"]
    text = dot.to_dot(build(1, 4, blocks=16, forloop=8))
    assert 'label="kernel.customized\\ngrid [16, 1, 1]  block [128, 1, 1]' in text
    assert "forloop_range 8" in text
    assert "block.forloop_accum\\nreduce rms" in text


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' not installed")
@pytest.mark.parametrize("fmt, magic", [("svg", b"<svg"), ("png", b"\x89PNG")])
def test_render_with_graphviz(fmt, magic):
    data = dot.render(dot.to_dot(HANDWRITTEN["gqa_flashdecoding"][1](1, 4)), fmt)
    assert magic in data[:400]


def test_render_without_graphviz_says_what_to_install(monkeypatch):
    monkeypatch.setattr(dot.shutil, "which", lambda name: None)
    with pytest.raises(MirageError, match="apt install graphviz"):
        dot.render("digraph {}", "svg")


def test_target_refuses_binary_formats():
    target = dot.DotTarget(format="png")
    with pytest.raises(MirageError, match="tools/render_dot.py"):
        target.emit(make_context(), WORKLOADS["lora"].module(1, 8), StringIO())
