"""The equivalence verifier: verdicts, bounds, signatures, float cross-check."""

import math

import pytest

from mirage_xdsl.verify.equivalence import (
    TARGET_BOUND,
    equivalent,
    float_check,
    trials_for,
)
from mirage_xdsl.verify.fingerprint_bound import program_degrees, trial_bound
from mirage_xdsl.workloads import ALGEBRAIC, HANDWRITTEN, WORKLOADS

SCALE = 16


def small(build, name: str, batch: int = 2):
    if name == "gqa_flashdecoding":
        return build(batch, SCALE, splits=4, forloop=4)
    return build(batch, SCALE)


@pytest.mark.parametrize("name", sorted(HANDWRITTEN) + sorted(ALGEBRAIC))
def test_correct_rewrites_are_accepted(name: str) -> None:
    workload, build = {**HANDWRITTEN, **ALGEBRAIC}[name]
    plain = WORKLOADS[workload].module(2, SCALE)
    rewrite = small(build, name)
    assert float_check(plain, rewrite).agree
    verdict = equivalent(plain, rewrite)
    assert verdict.equivalent, verdict.reason
    assert verdict.false_positive_bound <= TARGET_BOUND
    assert verdict.trials == trials_for(verdict.per_trial_bound)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_default_trials_reach_the_target_at_full_shapes(name: str) -> None:
    for batch in (1, 8):
        degrees = program_degrees(WORKLOADS[name].module(batch))
        per_trial = trial_bound(degrees, degrees).total
        assert per_trial < 2**-17
        assert per_trial ** trials_for(per_trial) <= TARGET_BOUND
        assert trials_for(per_trial) <= 3


def test_different_workloads_are_rejected() -> None:
    gqa = WORKLOADS["gqa"].module(1, SCALE)
    qknorm = WORKLOADS["qknorm_gqa"].module(1, SCALE)
    verdict = equivalent(gqa, qknorm)
    assert not verdict.equivalent and verdict.false_positive_bound == 0.0
    assert "output #0 differs" in verdict.reason
    assert not float_check(gqa, qknorm).agree


def test_signature_mismatch_names_the_difference() -> None:
    a = WORKLOADS["gqa"].module(1, SCALE)
    b = WORKLOADS["gqa"].module(2, SCALE)
    verdict = equivalent(a, b)
    assert not verdict.equivalent and verdict.trials == 0
    assert "input #0 is [1, 2, 16, 64] of f16 in the first program" in verdict.reason
    lora = WORKLOADS["lora"].module(1, SCALE)
    assert "have 3 and 4 inputs" in equivalent(a, lora).reason


def test_explicit_trials_and_bound() -> None:
    a = WORKLOADS["lora"].module(1, SCALE)
    b = small(HANDWRITTEN["lora_fused"][1], "lora_fused", 1)
    one = equivalent(a, b, trials=1, seed=7)
    assert one.equivalent and one.trials == 1
    assert math.isclose(one.false_positive_bound, one.per_trial_bound)
    three = equivalent(a, b, trials=3)
    assert math.isclose(three.false_positive_bound, three.per_trial_bound**3)


def test_sqrt_identities_are_not_recognised() -> None:
    # rms_norm(2x) = rms_norm(x) over the reals, but only through
    # sqrt(4m) = 2 sqrt(m), which the random sqrt function does not satisfy.
    from mirage_xdsl.ir.builder import float16, new_kernel_graph

    def build(double: bool):
        g = new_kernel_graph("f")
        x = g.new_input((2, 8), float16)
        g.mark_output(g.rms_norm(g.add(x, x) if double else x))
        return g.module()

    assert float_check(build(False), build(True)).agree
    assert not equivalent(build(False), build(True)).equivalent


def test_cli_device_without_a_gpu_is_one_line_error(monkeypatch, capsys) -> None:
    from mirage_xdsl.cli import verify as cli

    monkeypatch.setattr(cli, "gpu_arithmetic", lambda: None)
    assert (
        cli.main(["examples/lora.mlir", "examples/lora_fused.mlir", "--device", "cuda"])
        == 1
    )
    assert (
        capsys.readouterr().err == "error: --device cuda: torch sees no CUDA GPU here\n"
    )


def _one_input(build):
    from mirage_xdsl.ir.builder import new_kernel_graph

    g = new_kernel_graph()
    x = g.new_input((4, 16))
    g.mark_output(build(g, x))
    return g.module()


def test_scalar_constants_are_exact_rationals():
    """A wrong constant is rejected; constants that multiply out equal are
    accepted, also as exponents (exp(x/2)^2 = exp(x))."""
    from mirage_xdsl.verify import equivalent as verify

    eighth = _one_input(lambda g, x: g.mul_scalar(x, 0.125))
    assert not verify(eighth, _one_input(lambda g, x: g.mul_scalar(x, 0.25))).equivalent
    split = _one_input(lambda g, x: g.mul_scalar(g.mul_scalar(x, 0.5), 0.25))
    assert verify(eighth, split).equivalent
    half_exp = _one_input(lambda g, x: g.square(g.exp(g.mul_scalar(x, 0.5))))
    assert verify(_one_input(lambda g, x: g.exp(x)), half_exp).equivalent
    shifted = _one_input(lambda g, x: g.add_scalar(g.add_scalar(x, 0.75), -0.25))
    assert verify(_one_input(lambda g, x: g.add_scalar(x, 0.5)), shifted).equivalent
    eps = _one_input(lambda g, x: g.rms_norm(x, eps=1e-6))
    assert not verify(eps, _one_input(lambda g, x: g.rms_norm(x))).equivalent


def test_identities_through_a_keyed_function_are_not_proved() -> None:
    """relu(x) - relu(-x) = x holds, but relu is a keyed random function in
    the field: the verifier says "not equivalent" (safe, incomplete) while the
    float cross-check agrees, as docs/verifier.md states."""
    from mirage_xdsl.ir.builder import new_kernel_graph
    from mirage_xdsl.verify.equivalence import equivalent, float_check

    g = new_kernel_graph("identity")
    x = g.new_input((4, 8))
    g.mark_output(g.add(g.relu(x), g.neg(g.relu(g.neg(x)))))
    lhs = g.module()
    h = new_kernel_graph("identity")
    h.mark_output(h.new_input((4, 8)))
    rhs = h.module()
    assert float_check(lhs, rhs).agree
    assert not equivalent(lhs, rhs).equivalent


# --- reduce_max: the row maximum as a keyed random function of the row ---------


def _kernel(name: str, shape, body):
    """A one-input program: ``body(graph, x)`` is its output."""
    from mirage_xdsl.ir.builder import new_kernel_graph

    g = new_kernel_graph(name)
    g.mark_output(body(g, g.new_input(shape)))
    return g.module()


def _shifted(g, x, dim: int = 1):
    return g.add(x, g.neg(g.reduce_max(x, dim)))


def test_safe_softmax_is_proved_equal_to_plain_softmax() -> None:
    """exp(x - max) / sum(exp(x - max)) = exp(x) / sum(exp(x)): the shift is a
    keyed random value per row, and exp(a - m) = exp(a) exp(-m) cancels it
    exactly; both kernel-level and as one customized kernel."""
    from softmax_program import blocked_softmax_module, softmax_module

    plain = softmax_module((64, 512), safe=False)
    for safe in (softmax_module((64, 512)), blocked_softmax_module((64, 512), 4)):
        verdict = equivalent(safe, plain)
        assert verdict.equivalent, verdict.reason
        assert verdict.false_positive_bound <= TARGET_BOUND
        assert float_check(safe, plain).agree


def test_safe_attention_is_proved_equal_to_plain_attention() -> None:
    """softmax(Q·K)·V with the row maximum of the scores subtracted."""
    from softmax_program import attention_module

    safe, plain = attention_module(), attention_module(safe=False)
    verdict = equivalent(safe, plain)
    assert verdict.equivalent, verdict.reason
    assert verdict.false_positive_bound <= TARGET_BOUND


def test_online_softmax_attention_is_proved_equal_to_plain_attention() -> None:
    """One kernel looping over the keys, each iteration shifted by its own
    row maximum and both sums rescaled to the running one (shifted
    accumulations), is proved equal to the plain and the safe program within
    the target bound; with the row sums left unshifted, the shifts no longer
    cancel, and the verifier and the float check both say so."""
    from softmax_program import attention_module, online_attention_module

    online = online_attention_module()
    for other in (
        attention_module(2, 20, 96, 16, safe=False),
        attention_module(2, 20, 96, 16),
    ):
        verdict = equivalent(online, other)
        assert verdict.equivalent, verdict.reason
        assert verdict.false_positive_bound <= TARGET_BOUND
        assert float_check(online, other).agree
    wrong = online_attention_module(shift_sums=False)
    assert not equivalent(wrong, attention_module(2, 20, 96, 16)).equivalent
    assert not float_check(wrong, online).agree


def test_a_loop_invariant_shift_weights_each_iteration_by_one() -> None:
    """A shift read once for the whole loop is its own maximum: the shifted
    row sums are the plain ones, in the field as over the reals."""
    from mirage_xdsl.ir.builder import new_kernel_graph, new_threadblock_graph

    def program(shifted: bool):
        g = new_kernel_graph("sums")
        x, y = g.new_input((8, 32)), g.new_input((8, 1))
        bg = new_threadblock_graph((2, 1, 1), (128, 1, 1), 4)
        bx = bg.new_input(x, (0, -1, -1), 1)
        by = bg.new_input(y, (0, -1, -1), -1)
        acc = bg.forloop_accum(bg.exp(bx), "sum", shift=by if shifted else None)
        bg.new_output(acc, (0, -1, -1))
        (out,) = g.customized([x, y], bg)
        g.mark_output(out)
        return g.module()

    assert equivalent(program(True), program(False)).equivalent
    assert float_check(program(True), program(False)).agree


def test_a_shift_that_does_not_cancel_is_rejected() -> None:
    """exp(x - max(x)) / sum(exp(x)) is not softmax, exp(x - max(x)) is not
    exp(x), and a shift by another row's maximum (a column maximum) does not
    cancel either; the float check agrees that they differ."""
    from softmax_program import softmax_module

    shape = (8, 32)
    plain = softmax_module(shape, safe=False)

    def half_shifted(g, x):
        return g.div(g.exp(_shifted(g, x)), g.reduce_sum(g.exp(x), 1))

    def column_shifted(g, x):
        e = g.exp(g.add(x, g.neg(g.reduce_max(x, 0))))
        return g.div(e, g.reduce_sum(e, 1))

    for wrong in (
        _kernel("a", shape, half_shifted),
        _kernel("b", shape, column_shifted),
    ):
        assert not equivalent(wrong, plain).equivalent
        assert not float_check(wrong, plain).agree
    exp_shifted = _kernel("c", shape, lambda g, x: g.exp(_shifted(g, x)))
    exp_plain = _kernel("d", shape, lambda g, x: g.exp(x))
    assert not equivalent(exp_shifted, exp_plain).equivalent
    assert not float_check(exp_shifted, exp_plain).agree


def test_the_maximum_itself_is_only_equal_to_the_same_function_of_the_same_row() -> (
    None
):
    """A program whose output is max(x) is proved equal to max(x) computed in
    a customized kernel (the same row meets the same keyed value), and told
    apart from the sum, from the maximum of another dim and of 2x. Identities
    that depend on the maximum's value (max(x + c) = max(x) + c) are not
    proved: the verdict is "not equivalent" while the float check agrees."""
    from mirage_xdsl.ir.builder import new_kernel_graph, new_threadblock_graph

    shape = (16, 64)
    top = _kernel("top", shape, lambda g, x: g.reduce_max(x, 1))
    g = new_kernel_graph("top_kernel")
    x = g.new_input(shape)
    bg = new_threadblock_graph((4, 1, 1), (128, 1, 1), 1)
    bg.new_output(bg.reduce_max(bg.new_input(x, (0, -1, -1), -1), 1), (0, -1, -1))
    g.mark_output(g.customized([x], bg)[0])
    assert equivalent(top, g.module()).equivalent
    for other in (
        _kernel("sum", shape, lambda g, x: g.reduce_sum(x, 1)),
        _kernel("twice", shape, lambda g, x: g.reduce_max(g.mul_scalar(x, 2.0), 1)),
    ):
        assert not equivalent(top, other).equivalent
    shifted = _kernel("plus", shape, lambda g, x: g.reduce_max(g.add_scalar(x, 1.0), 1))
    plus_after = _kernel(
        "after", shape, lambda g, x: g.add_scalar(g.reduce_max(x, 1), 1.0)
    )
    assert float_check(shifted, plus_after).agree
    assert not equivalent(shifted, plus_after).equivalent


def test_a_partial_row_maximum_is_not_the_row_maximum() -> None:
    """A customized kernel whose grid splits the row takes each block's
    maximum of half a row; a second kernel's maximum of those two partial
    maxima equals the row maximum in the reals, but the verifier only meets
    whole rows, so it reports "not equivalent" (safe) while floats agree."""
    from mirage_xdsl.ir.builder import new_kernel_graph, new_threadblock_graph

    shape = (16, 64)
    top = _kernel("top", shape, lambda g, x: g.reduce_max(x, 1))
    g = new_kernel_graph("split")
    x = g.new_input(shape)
    bg = new_threadblock_graph((2, 1, 1), (128, 1, 1), 1)
    bg.new_output(bg.reduce_max(bg.new_input(x, (1, -1, -1), -1), 1), (1, -1, -1))
    (parts,) = g.customized([x], bg)
    g.mark_output(g.reduce_max(parts, 1))
    split = g.module()
    assert float_check(split, top).agree
    assert not equivalent(split, top).equivalent


def test_row_maxima_count_in_the_bound() -> None:
    """Each reduce_max result is a fresh variable of the keyed group (here
    only in exponents), its row is a keyed-function argument, and the row
    digest's collision adds to the per-pair collision term."""
    from softmax_program import softmax_module

    from mirage_xdsl.verify.keyed_hash import ROW_DIGEST_COLLISION

    safe, plain = (
        program_degrees(softmax_module()),
        program_degrees(softmax_module(safe=False)),
    )
    assert safe.row_atoms and not plain.row_atoms
    assert safe.sqrt_arg == 1 and safe.sqrt_args_pure
    (out,) = safe.outputs
    assert out.sqrt_fan >= 1  # the maximum reaches the output (in an exponent)
    assert safe.exp_arg > plain.exp_arg  # x - max: one more variable
    both = trial_bound(safe, safe)
    assert both.sqrt_collisions >= ROW_DIGEST_COLLISION
    assert trial_bound(plain, plain).sqrt_collisions == 0.0


def _heads(swap: tuple[int, int], twice: bool = False):
    from mirage_xdsl.ir.builder import KernelGraph

    g = KernelGraph("heads")
    x = g.new_input((1, 8, 8, 8))
    y = g.transpose(g.exp(x), *swap)
    if twice:
        y = g.transpose(g.transpose(y, 2, 3), 2, 3)
    g.mark_output(g.reshape(y, (1, 8, 64)))
    return g.module()


def test_layout_ops_are_exact_and_a_wrong_swap_is_rejected() -> None:
    assert equivalent(_heads((1, 2)), _heads((1, 2), twice=True))
    assert not equivalent(_heads((1, 2)), _heads((2, 3)))
    assert not equivalent(_heads((1, 2)), _heads((1, 3)))
