"""Soundness corpus: every correct rewrite accepted, every mutant rejected.

Mutants come from the plain program and every hand-written µGraph of a
workload. A mutant the fp32 cross-check cannot tell from the plain program is
accidentally equivalent (e.g. doubling ``exp`` before a softmax) and is
excluded and counted; every other mutant must be rejected by the verifier.
"""

from collections import Counter

import pytest

from mirage_xdsl.verify.equivalence import equivalent, float_check
from mirage_xdsl.verify.mutants import mutants
from mirage_xdsl.workloads import HANDWRITTEN, WORKLOADS

SCALE = 16
MIN_MUTANTS = 20


def sources(workload: str):
    yield WORKLOADS[workload].module(2, SCALE)
    for name, (target, build) in sorted(HANDWRITTEN.items()):
        if target == workload:
            yield (
                build(2, SCALE, splits=4, forloop=4)
                if name == "gqa_flashdecoding"
                else build(2, SCALE)
            )


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_mutants_are_rejected(workload: str) -> None:
    plain = WORKLOADS[workload].module(2, SCALE)
    corpus = [m for program in sources(workload) for m in mutants(program)]
    excluded: list[str] = []
    checked = Counter()
    for mutant in corpus:
        if float_check(plain, mutant.module).agree:
            excluded.append(mutant.description)
            continue
        verdict = equivalent(plain, mutant.module)
        assert not verdict.equivalent, f"accepted mutant {mutant.description}"
        checked[mutant.description.split(": ")[1].split(" ")[0]] += 1
    print(f"{workload}: {sum(checked.values())} rejected {dict(checked)}, "
          f"{len(excluded)} excluded as float-equivalent")  # fmt: skip
    assert sum(checked.values()) >= MIN_MUTANTS
    assert len(excluded) < len(corpus) / 2


def test_mutants_are_valid_and_distinct() -> None:
    program = HANDWRITTEN["gqa_flashdecoding"][1](2, SCALE, splits=4, forloop=4)
    found = mutants(program)
    texts = {str(m.module) for m in found}
    assert len(texts) == len(found) > MIN_MUTANTS
    for m in found:
        m.module.verify()
    kinds = {m.description.split(": ")[1].split(" ")[0] for m in found}
    assert {"imap", "omap", "operand", "swap", "drop", "double"} <= kinds


def scaled_program():
    """Scaled attention with a shifted, normalised value input: every kind of
    float constant (``mul_scalar``, ``add_scalar``, ``rms_norm`` eps)."""
    from mirage_xdsl.ir.builder import new_kernel_graph

    g = new_kernel_graph("scaled")
    q, k, v = (
        g.new_input((2, 8, 16)),
        g.new_input((2, 16, 32)),
        g.new_input((2, 32, 16)),
    )
    e = g.exp(g.mul_scalar(g.matmul(q, k), 0.125))
    p = g.div(e, g.reduction(e, 2))
    g.mark_output(g.matmul(p, g.rms_norm(g.add_scalar(v, 0.75), eps=1e-2)))
    return g.module()


def test_constant_mutants_are_rejected() -> None:
    plain = scaled_program()
    corpus = mutants(plain)
    constants = [m for m in corpus if ": constant" in m.description]
    assert len(constants) == 9  # three wrong values for each of three constants
    for mutant in corpus:
        if float_check(plain, mutant.module).agree:
            assert ": constant" not in mutant.description
            continue
        verdict = equivalent(plain, mutant.module)
        assert not verdict.equivalent, f"accepted mutant {mutant.description}"


def _gated(kind: str, on_up: bool = False, fused: bool = False):
    """act(X·A) ∘ (X·B), or with ``on_up`` the activation on the other
    product; ``fused`` computes it as one customized kernel split over rows."""
    from mirage_xdsl.ir.builder import new_kernel_graph, new_threadblock_graph

    g = new_kernel_graph(f"{kind}_gated")
    x, a, b = g.new_input((8, 16)), g.new_input((16, 32)), g.new_input((16, 32))
    if not fused:
        gate, up = g.matmul(x, a), g.matmul(x, b)
        if on_up:
            gate, up = up, gate
        g.mark_output(g.mul(getattr(g, kind)(gate), up))
        return g.module()
    bg = new_threadblock_graph((2, 1, 1), (128, 1, 1), 1)
    bx = bg.new_input(x, (0, -1, -1), -1)
    ba, bb = bg.new_input(a, (-1, -1, -1), -1), bg.new_input(b, (-1, -1, -1), -1)
    bg.new_output(
        bg.mul(getattr(bg, kind)(bg.matmul(bx, ba)), bg.matmul(bx, bb)), (0, -1, -1)
    )
    (out,) = g.customized([x, a, b], bg)
    g.mark_output(out)
    return g.module()


@pytest.mark.parametrize("kind", ["relu", "gelu", "gelu_erf", "tanh", "sigmoid"])
def test_activation_on_the_wrong_argument_is_rejected(kind: str) -> None:
    """A keyed random function (relu, tanh, the GELUs) or the exp model
    (sigmoid) tells act(X·A) ∘ (X·B) from (X·A) ∘ act(X·B); the fused kernel
    that computes the same activation of the same argument is accepted."""
    plain = _gated(kind)
    assert equivalent(plain, _gated(kind, fused=True)).equivalent
    assert not equivalent(plain, _gated(kind, on_up=True)).equivalent
    kinds = {
        m.description.split("-> ")[-1]
        for m in mutants(plain)
        if "kind" in m.description
    }
    assert {"relu", "gelu", "gelu_erf", "tanh", "sigmoid", "neg"} - {kind} <= kinds
    for mutant in mutants(plain):
        if "kind" in mutant.description:
            assert not equivalent(plain, mutant.module).equivalent, mutant.description


def _softmax_sources():
    from softmax_program import (
        attention_module,
        blocked_softmax_module,
        online_attention_module,
        softmax_module,
    )

    yield softmax_module((8, 32)), softmax_module((8, 32), safe=False)
    yield blocked_softmax_module((8, 32), 2), softmax_module((8, 32), safe=False)
    plain = attention_module(1, 8, 32, 8, safe=False)
    yield attention_module(1, 8, 32, 8), plain
    yield online_attention_module(1, 8, 32, 8, forloop=2), plain


def test_safe_softmax_mutants_are_rejected() -> None:
    """Mutants of the safe softmax (kernel ops and one customized kernel), of
    safe attention and of attention with the online softmax (one kernel
    looping over the keys), each against the plain program: every mutant the float
    check tells apart is rejected, the maximum swapped for a sum or taken
    over the wrong dim, and an accumulation's shift dropped, included. Mutants that only change the shift (the
    maximum doubled or replaced by a sum, its negation dropped or swapped for
    an activation) leave the softmax unchanged: the float check agrees, and
    the verifier proves each equal, since every row constant cancels."""
    checked = Counter()
    excluded = 0
    for safe, plain in _softmax_sources():
        assert equivalent(safe, plain).equivalent
        for mutant in mutants(safe):
            verdict = equivalent(plain, mutant.module)
            if float_check(plain, mutant.module).agree:
                assert verdict.equivalent, f"shift-invariant {mutant.description}"
                excluded += 1
                continue
            assert not verdict.equivalent, f"accepted mutant {mutant.description}"
            checked[mutant.description.split(": ")[1].split(" ")[0]] += 1
    assert sum(checked.values()) >= MIN_MUTANTS
    assert checked["reduce"] >= 3
    assert checked["shift"] == 2  # either accumulation of the online softmax
    assert excluded < sum(checked.values())


def _multi_head_program():
    """Heads split by a reshape and a transpose, attended, and merged back."""
    from mirage_xdsl.ir.builder import KernelGraph

    g = KernelGraph("heads")
    x, w = g.new_input((1, 8, 64)), g.new_input((1, 64, 64))
    q = g.transpose(g.reshape(g.matmul(x, w), (1, 8, 8, 8)), 1, 2)
    s = g.exp(g.matmul(q, g.transpose(q, 2, 3)))
    o = g.matmul(g.div(s, g.reduction(s, 3)), q)
    g.mark_output(g.reshape(g.transpose(o, 1, 2), (1, 8, 64)))
    return g.module()


def test_layout_mutants_are_rejected() -> None:
    """Mutants of a program with heads split and merged: a transpose of the
    wrong dims, an op dropped or doubled, operands swapped. Every mutant the
    float check tells apart is rejected."""
    program = _multi_head_program()
    checked = Counter()
    for mutant in mutants(program):
        if float_check(program, mutant.module).agree:
            continue
        assert not equivalent(program, mutant.module), mutant.description
        checked[mutant.description.split(": ")[1].split(" ")[0]] += 1
    assert checked["transpose"] >= 2
    assert sum(checked.values()) >= 20
